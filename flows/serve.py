"""`tracelab serve`: the report site on http://127.0.0.1:PORT/, files inside DATA/site only."""

from __future__ import annotations

import argparse

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import number_arg
from tracelab.flows.settings import Settings
from tracelab.reports.server import site_server


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port",
        type=number_arg(int, 0, 65535),
        default=8000,
        help="TCP port on 127.0.0.1 (default 8000; 0 = any free port)",
    )
    parser.add_argument("--quiet", action="store_true", help="do not log each request")


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    site = settings.site_dir
    if not (site / "index.html").is_file():
        raise TracelabError(
            f"no report site at {site}: run `tracelab report` (or `tracelab run`) first"
        )
    if not 0 <= args.port <= 65535:
        raise TracelabError(f"--port {args.port} is not a TCP port (0-65535)")
    try:
        server = site_server(site, args.port, quiet=args.quiet)
    except OSError as exc:
        raise TracelabError(
            f"cannot listen on 127.0.0.1:{args.port} ({exc.strerror}); try another --port"
        ) from exc
    host, port = server.server_address[:2]
    print(
        f"serving {site.resolve()} on http://{host!s}:{port}/ (loopback only; Ctrl-C stops)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped")
    finally:
        server.server_close()
    return 0
