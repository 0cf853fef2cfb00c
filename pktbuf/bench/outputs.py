"""``--json``, ``--plot`` and ``--report``: what a ``pktbuf bench`` run writes besides its table."""
from __future__ import annotations

import sys
from pathlib import Path

from . import markdown, plot
from .results import write_json

DEFAULT_REPORT = "docs/performance.md"


def add_output_args(ap, bench: str) -> None:
    g = ap.add_argument_group("output")
    g.add_argument("--json", metavar="FILE",
                   help="write every figure (pktbuf and DPDK, with samples, units and ratios), "
                        "the machine, the command line, the date and the git commit as JSON")
    g.add_argument("--plot", metavar="FILE.svg",
                   help="draw pktbuf against DPDK per case as an SVG (needs matplotlib: "
                        "pip install 'pktbuf[plot]')")
    g.add_argument("--report", nargs="?", const=DEFAULT_REPORT, default=None, metavar="PATH",
                   help=f"write this run's section of PATH (default {DEFAULT_REPORT}) and its "
                        f"chart beside it ({markdown.CHARTS[bench]})")


    g.add_argument("--from-json", metavar="FILE",
                   help="measure nothing: print, plot and report the run recorded in FILE "
                        "(written by --json)")


def check_output_args(ap, args) -> None:
    """Refuse before measuring what could not be written afterwards."""
    if args.plot and not plot.available():
        ap.exit(2, f"{ap.prog}: --plot: {plot.MISSING}\n")


def recorded(ap, args, bench: str) -> dict | None:
    """The document named by ``--from-json`` (None without it); a bad file exits with 2."""
    if not args.from_json:
        return None
    from .results import read_json
    try:
        doc = read_json(args.from_json)
    except (OSError, ValueError) as e:
        ap.exit(2, f"{ap.prog}: --from-json: {e}\n")
    if doc["bench"] != bench:
        ap.exit(2, f"{ap.prog}: --from-json: {args.from_json} records 'pktbuf bench "
                   f"{doc['bench']}', not {bench}\n")
    return doc


def write_outputs(doc: dict, args, err=None) -> int:
    err = err or sys.stderr
    if args.json:
        write_json(doc, args.json)
        print(f"wrote {args.json}", file=err)
    if args.plot:
        plot.draw(doc, args.plot)
        print(f"wrote {args.plot}", file=err)
    if args.report:
        page = markdown.update(args.report, doc)
        print(f"wrote {page}", file=err)
        chart = Path(page).parent / markdown.CHARTS[doc["bench"]]
        if plot.available():
            plot.draw(doc, chart)
            print(f"wrote {chart}", file=err)
        else:
            print(f"{chart} not redrawn: {plot.MISSING}", file=err)
    return 0
