"""The fault campaign: every berthmaster component under churn and injected faults on one
local control plane, with invariants checked throughout (berthmaster/tooling/chaos/).

    python bench/chaos.py --minutes 30 --seed 1     # the long run
    python bench/chaos.py --minutes 3 --seed 1      # the short run of tests/integration/chaos

It prints figures and a verdict, and asserts no time: the last line reads
``invariant breaches: N | ...`` and the exit code is 1 on any breach. See docs/reliability.md.
"""

from __future__ import annotations

import argparse
import sys

from berthmaster.tooling.chaos.campaign import main

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="length of the run")
    parser.add_argument("--seed", type=int, default=1, help="seed of the churn and the faults")
    parser.add_argument("--hold", type=float, default=6.0,
                        help="seconds a lasting fault lasts (NotReady, a dead hook controller)")
    args = parser.parse_args()
    sys.exit(main(args.minutes, args.seed, hold=args.hold))
