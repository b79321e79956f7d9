"""Does a carried calibration match this machine's key? Prints the key, the file it maps to, and,
when that file is absent, how each calibration in the directory differs from it.

Used by benchmarks/trust_pass.sh on the device, where calibrations are carried in from an earlier
session rather than taken again (a ``calibrate --quick`` costs four minutes of device time).
``--rekey`` copies a calibration whose key differs only in the fields named by ``--fields`` (the
host name and the GPU model by default: the same machine class under another name) to this
key's path; any other difference (CPU model, Python, torch, the scope method) is reported and left
alone, since its costs would not be this machine's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlscope.overhead.correct.calibration import calibration_dir, current_key, path_for


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rekey", action="store_true", help="copy a near match to this key's path")
    parser.add_argument("--fields", default="host,gpu", help="fields a near match may differ in")
    args = parser.parse_args(argv)
    key = current_key()
    target = path_for(key)
    print(f"calibration key: {json.dumps(key, sort_keys=True)}")
    print(f"calibration file: {target} ({'present' if target.exists() else 'absent'})")
    if target.exists():
        return 0
    allowed = set(args.fields.split(","))
    for path in sorted(Path(calibration_dir()).glob("*.json")):
        if path.name.startswith("speed-"):
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            print(f"  {path.name}: unreadable ({exc})")
            continue
        other = data.get("key", {})
        diff = {f: (other.get(f), key[f]) for f in key if other.get(f) != key[f]}
        print(f"  {path.name} differs in {diff}")
        if args.rekey and diff and set(diff) <= allowed:
            data["key"] = key
            data.setdefault("rekeyed_from", other)
            target.write_text(json.dumps(data, indent=1))
            print(f"  rekeyed to {target.name}")
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
