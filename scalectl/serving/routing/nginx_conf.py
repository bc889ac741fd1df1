"""Render one tier's nginx configuration (pure). Included inside ``http { }``.

Stateless tiers use ``least_conn``: long streaming generations make round-robin pile up on one server.
A tier with variants gives each server a ``weight`` by its capacity: ``least_conn`` divides active
connections by weight, so an instance twice another's size carries twice its requests.
Session-affinity tiers hash ``X-Session-Id`` consistently, so a conversation returns to the instance that
holds its KV cache and adding or removing one instance moves only ~1/N of the sessions; requests without
the header hash on ``$request_id`` and spread. An upstream with no servers is an nginx error, so an empty
tier keeps a placeholder server marked ``down`` and its server block answers 503 — unless the tier has an
activator: then the empty tier's upstream is the activator (every daemon replica's), and its server block
sends each request to ``/activate/<tier>/<path>``, where it is held until the first instance is ready.
"""

from __future__ import annotations

from collections.abc import Sequence

from scalectl.serving.routing.base import Endpoint, TierRoute

HEADER = "# Managed by scalectl; rewritten on every change. Edit the tier, not this file.\n"


def upstream_name(tier: str) -> str:
    return "scalectl_" + tier.replace("-", "_")


def render_tier(route: TierRoute, endpoints: Sequence[Endpoint]) -> str:
    name = upstream_name(route.name)
    addresses = sorted({e.address for e in endpoints})  # stable order: no reload when only order changed
    weights = {e.address: e.weight for e in endpoints}
    out = [HEADER, f"# tier {route.name}: {len(addresses)} ready instance(s)\n"]
    if route.session_affinity:
        key = f"${name}_session"
        out.append(f'map $http_x_session_id {key} {{\n    "" $request_id;\n    default $http_x_session_id;\n}}\n')
        balance = f"hash {key} consistent;"
    else:
        balance = "least_conn;"
    activating = not addresses and bool(route.activator) and route.listen is not None
    out.append(f"upstream {name} {{\n    {balance}\n")
    if addresses:
        for address in addresses:
            weight = f" weight={weights[address]}" if weights[address] != 1 else ""
            out.append(
                f"    server {address}{weight} max_fails={route.max_fails} fail_timeout={route.fail_timeout_s}s;\n"
            )
        out.append("    keepalive 32;\n")
    elif activating:
        out.append("    # no ready instance: the activator holds requests until one is\n")
        for address in route.activator:
            out.append(f"    server {address} max_fails=0;\n")
    else:
        out.append("    server 127.0.0.1:9 down;  # placeholder: nginx rejects an empty upstream\n")
    out.append("}\n")
    if route.listen:
        out.append(_activator_block(route, name) if activating else _server_block(route, name, empty=not addresses))
    return "".join(out)


def _activator_block(route: TierRoute, name: str) -> str:
    """The empty tier's requests go to ``/activate/<tier>/…`` (nginx swaps the location's ``/`` for that
    prefix). A standby's activator answers 503 at once; with several replicas nginx then tries the next,
    which is safe for a POST because the standby read nothing of it."""
    retry = "        proxy_next_upstream error timeout http_503 non_idempotent;\n" if len(route.activator) > 1 else ""
    return (
        f"server {{\n    listen {route.listen};\n"
        "    location / {\n"
        f"        proxy_pass http://{name}/activate/{route.name}/;\n"
        "        proxy_http_version 1.1;\n"
        '        proxy_set_header Connection "";\n'
        "        proxy_set_header Host $host;\n"
        "        proxy_set_header X-Request-Id $request_id;\n"
        "        proxy_buffering off;  # stream tokens as they are generated\n"
        f"        proxy_read_timeout {route.activator_wait_s + route.read_timeout_s}s;\n"
        f"{retry}"
        "        add_header X-Scalectl-Upstream $upstream_addr always;\n"
        "    }\n"
        "}\n"
    )


def _server_block(route: TierRoute, name: str, *, empty: bool) -> str:
    if empty:
        body = (
            "    default_type application/json;\n"
            "    add_header Retry-After 30 always;\n"
            f'    return 503 \'{{"error": "no ready instances for tier {route.name}"}}\\n\';\n'
        )
    else:
        body = (
            "    location / {\n"
            f"        proxy_pass http://{name};\n"
            "        proxy_http_version 1.1;\n"
            '        proxy_set_header Connection "";\n'
            "        proxy_set_header Host $host;\n"
            "        proxy_set_header X-Request-Id $request_id;\n"
            "        proxy_buffering off;  # stream tokens as they are generated\n"
            f"        proxy_read_timeout {route.read_timeout_s}s;\n"
            "        add_header X-Scalectl-Upstream $upstream_addr always;\n"
            "    }\n"
        )
    return f"server {{\n    listen {route.listen};\n{body}}}\n"
