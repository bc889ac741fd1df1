"""Every constant of the decision core, one line each: what it is and why that value.

Rates are per second; durations in seconds; shares are of the capacity prior unless said otherwise.
"""

from __future__ import annotations

# --- demand: trend and surge (demand.py) ----------------------------------------------------------------
STABLE_HALF_LIFE_S = 60.0  # the baseline rate's half-life: Knative KPA's 60 s stable window
SURGE_RATIO = 2.0  # a tick at this multiple of the baseline is a surge: KPA panics at twice its target
SIGMAS = 2.0  # a count must clear its Poisson noise by this many σ to count as a surge or a rise
PANIC_HOLD_S = STABLE_HALF_LIFE_S  # after a surge the newest tick is the level until the baseline has caught up
# for a half-life (KPA leaves panic after a stable window)
TREND_S = 120.0  # the trend is fitted through the ticks of this window: short enough to follow a step, long
# enough that a ×4 rise over 5 minutes clears its Poisson noise at any tick length
TREND_MAX_TICKS = 32  # at most this many newest ticks of that window (Theil–Sen is quadratic in them)
MIN_TREND_TICKS = 3  # fewer ticks since the last surge: no slope, the level alone
TREND_Z = 4.0  # a rise must be this many standard errors of a line fitted through the ticks' noise: tried every tick
LEVEL_TICKS = 3  # the level is the median of this many newest ticks: one noisy tick does not move it
DEFAULT_HORIZON_S = 300.0  # the boot horizon (and a schedule's lead, a batch burst's boot) until the tier has
# measured its boots and no boot model gives one: the slow end of GPU clouds' 2-5 minutes

# --- forecast errors (forecast.py) ----------------------------------------------------------------------
ERR_SAMPLE_S = 30.0  # a forecast is filed for checking at most this often: errors a tick apart are one error
ERR_KEEP = 40  # errors kept per forecaster (20 minutes at one per 30 s): recent, yet a usable quantile
ERR_MIN = 5  # fewer errors measured: the error is unknown and the cold headroom stands in
ERR_QUANTILE = 0.9  # the shortfall quantile sizing adds: one forecast in ten may fall short, not more
COLD_HEADROOM = 0.25  # headroom while a forecaster's error is unmeasured (as the old target utilisation 0.8)

# --- history bins (history.py) --------------------------------------------------------------------------
HOUR_S, DAY_S = 3600.0, 86400.0
MIN_CYCLES = 3  # a period must repeat this often in the history: two could be chance
SEASONS_S = (DAY_S, 7 * DAY_S)  # a day and a week: the periods business traffic repeats on
MINUTE_S = 60.0  # the fine series' bin: a 2-minute cron burst spans two or three bins
MINUTES_KEPT = round(MIN_CYCLES * HOUR_S / MINUTE_S)  # three cycles of a period up to an hour (3 h of minutes)
SLOT_S = 900.0  # the coarse series' bin: a morning ramp moves within a quarter hour
SLOTS_KEPT = round((max(SEASONS_S) + DAY_S) / SLOT_S)  # a week and a day: a day and a week ago both on record
COVERED = 0.9  # a bin counts once this share of it was observed (a partial bin reads as a dip)

# --- periodicity (periodicity.py) -----------------------------------------------------------------------
MIN_HISTORY_BINS = MINUTES_KEPT // MIN_CYCLES  # one cycle of the longest minute period (an hour) before any is
# looked for (a 15-min period: four cycles)
MIN_LAG = 3  # shortest period, in bins: shorter is the trend's to follow
ACF_MIN = 0.4  # autocorrelation a period needs at least...
ACF_Z = 4.0  # ...and this many standard errors (1/√pairs) of white noise: tried at ~40 lags, 4σ stays quiet
ACF_DIP = 0.2  # ...and must rise this much above a dip at a shorter lag: a persistent series decays without one
HARMONIC = 0.85  # the shortest lag within this share of the best wins: 30 and 45 min echo a 15-min period

# --- seasonality (seasonal.py) --------------------------------------------------------------------------
LEVEL_WINDOW_S = HOUR_S  # the last hour against the same hour a season ago sets today's scale
LEVEL_CLAMP = (0.5, 2.0)  # the scale a season ago may be stretched by: a holiday is not a new season

# --- capacity (capacity.py) -----------------------------------------------------------------------------
KNEE_SHARE = 0.8  # an engine limit (sequence slots, compute) × this is the prior: a queue's tail grows before it
BIN = 0.05  # observation bins, as a share of the prior
MAX_BIN = 60  # loads above 3× the prior share the last bin
SETTLE_S = 60.0  # a changed ready count must hold this long before the latency window describes it
CAP_HALF_LIFE_S = 6 * 3600.0  # observations fade: a new model or traffic mix is learned within hours
MIN_WEIGHT = 6.0  # observations a bin needs before it counts
BAD_SHARE = 0.25  # a bin with more breaches than this share is past the knee
TOO_LITTLE = 0.2  # a breach below this share of the prior is a slow request, not load
FIT_SPAN = 0.15  # the good bins must span this much load to fit latency against it
EXTRAPOLATE = 1.1  # the fit may reach this multiple of the highest load seen holding, never further: capacity
# walks up as the fleet holds higher loads, one step per sizing, instead of leaping to a guess
CLAMP = (0.1, 2.0)  # learned capacity stays within these multiples of the prior, and says when it hit one

# --- sizing and behaviour (sizing.py, behaviour.py) -----------------------------------------------------
DRAIN_S = 120.0  # a growing backlog is sized to drain within about one boot
STABLE_WINDOW_S = 300.0  # scale in only to the highest need of this window: HPA's scale-down stabilisation
SCALE_IN_FRACTION = 0.5  # at most this share of the fleet released per step (HPA's Percent policy)
SCALE_IN_PERIOD_S = 60.0  # between scale-in steps
IDLE_S = 300.0  # nothing arriving and nothing waiting this long → the floor at once
STALE_S = 90.0  # a reading older than this is unknown: hold, never scale in
