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


def check_output_args(ap, args) -> None:
    """Refuse before measuring what could not be written afterwards."""
    if args.plot and not plot.available():
        ap.exit(2, f"{ap.prog}: --plot: {plot.MISSING}\n")


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
