"""The shared kernel: the words every other package uses (instance lifecycle), with no I/O and no imports
of ours. The store maps its rows onto these types; the reconciler's phases work on them."""
