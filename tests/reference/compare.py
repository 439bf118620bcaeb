#!/usr/bin/python3
"""Compare a colibri logits dump with a reference, or two greedy id strings.

  compare.py logits GOT.bin REF.bin --vocab V [--got-rows A:B] [--ref-rows A:B]
             [--max-rel X] [--max-rel-row X] [--rms-std X] [--min-argmax F]
             [--lead-rel X --lead-rows N] [--label S]
  compare.py greedy GOT REF [--label S]        (each a file or a literal id list)

logits: both files are raw little-endian float32 [rows][V]; row ranges select rows
(python slice syntax, e.g. 40:64). Figures printed (one line):
  max_abs      max |got - ref|
  max_rel      max_abs / max |ref|                (whole selection)
  max_rel_row  max over rows of  max_abs(row) / max |ref row|
  rms          sqrt(mean((got - ref)^2));  rms_std = rms / std(ref)
  argmax       rows whose argmax agrees (ties to the lowest id) / rows
  lead         (with --lead-rel X) how many leading rows have max_rel_row <= X, i.e. where
               the first row beyond X is
Exit status 1 when a given bound is exceeded (--max-rel, --max-rel-row, --rms-std are
upper bounds; --min-argmax is a lower bound on the agreeing fraction; --lead-rows N with
--lead-rel X requires the first N rows to be within X each), 2 on bad input.
greedy: exact comparison of two id sequences; prints the first mismatch.
"""
import argparse
import os
import sys

import numpy as np


def _slice(s):
    if not s:
        return slice(None)
    a, _, b = s.partition(":")
    return slice(int(a) if a else None, int(b) if b else None)


def load_rows(path, vocab, rows):
    if not os.path.exists(path):
        raise SystemExit(f"compare: {path}: no such file")
    size = os.path.getsize(path)
    if size == 0 or size % (4 * vocab):
        raise SystemExit(f"compare: {path}: {size} bytes is not a whole number of float32 rows of {vocab}")
    a = np.fromfile(path, dtype="<f4").reshape(-1, vocab)
    return a[_slice(rows)]


def figures(got, ref, lead_rel=None):
    d = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    maxref = float(np.max(np.abs(ref)))
    row_rel = d.max(axis=1) / np.maximum(np.abs(ref).max(axis=1), 1e-30)
    rms = float(np.sqrt(np.mean(d * d)))
    std = float(np.std(ref.astype(np.float64)))
    agree = int(np.sum(np.argmax(got, axis=1) == np.argmax(ref, axis=1)))
    lead = None
    if lead_rel is not None:
        over = np.nonzero(~(row_rel <= lead_rel))[0]
        lead = int(over[0]) if over.size else int(got.shape[0])
    return {
        "lead": lead,
        "max_abs": float(d.max()),
        "max_rel": float(d.max()) / max(maxref, 1e-30),
        "max_rel_row": float(row_rel.max()),
        "worst_row": int(np.argmax(row_rel)),
        "rms": rms,
        "rms_std": rms / max(std, 1e-30),
        "ref_std": std,
        "ref_max_abs": maxref,
        "argmax": agree,
        "rows": int(got.shape[0]),
        "finite": bool(np.isfinite(got).all()),
    }


def cmd_logits(a):
    got = load_rows(a.got, a.vocab, a.got_rows)
    ref = load_rows(a.ref, a.vocab, a.ref_rows)
    if got.shape != ref.shape:
        print(f"{a.label}: FAIL shape mismatch: got {got.shape[0]} rows, reference {ref.shape[0]} rows")
        return 1
    if a.lead_rows is not None and a.lead_rel is None:
        raise SystemExit("compare: --lead-rows needs --lead-rel")
    f = figures(got, ref, a.lead_rel)
    lead = "" if f["lead"] is None else f" lead(<={a.lead_rel:g})={f['lead']}/{f['rows']}"
    print(f"{a.label}: max_abs={f['max_abs']:.3g} max_rel={f['max_rel']:.3g} "
          f"max_rel_row={f['max_rel_row']:.3g} (row {f['worst_row']}) rms={f['rms']:.3g} "
          f"rms_std={f['rms_std']:.3g} ref_std={f['ref_std']:.3g} ref_max={f['ref_max_abs']:.3g} "
          f"argmax={f['argmax']}/{f['rows']}{lead}")
    bad = []
    if not f["finite"]:
        bad.append("non-finite values in the dump")
    if a.max_rel is not None and not f["max_rel"] <= a.max_rel:
        bad.append(f"max_rel {f['max_rel']:.3g} > {a.max_rel:g}")
    if a.max_rel_row is not None and not f["max_rel_row"] <= a.max_rel_row:
        bad.append(f"max_rel_row {f['max_rel_row']:.3g} > {a.max_rel_row:g} at row {f['worst_row']}")
    if a.rms_std is not None and not f["rms_std"] <= a.rms_std:
        bad.append(f"rms_std {f['rms_std']:.3g} > {a.rms_std:g}")
    if a.min_argmax is not None and f["argmax"] < a.min_argmax * f["rows"] - 1e-9:
        bad.append(f"argmax agreement {f['argmax']}/{f['rows']} < {a.min_argmax:g}")
    if a.lead_rows is not None and f["lead"] < min(a.lead_rows, f["rows"]):
        bad.append(f"row {f['lead']} has max_rel_row > {a.lead_rel:g}; the first {a.lead_rows} rows must be within it")
    if bad:
        print(f"{a.label}: FAIL " + "; ".join(bad))
        return 1
    return 0


def _ids(s):
    src = s
    if os.path.exists(s):
        s = open(s).read()
    try:
        return [int(t) for t in s.replace(",", " ").split()]
    except ValueError:
        raise SystemExit(f"compare: FAIL {src}: not a list of token ids (stdout must hold only the ids): {s[:200]!r}")


def cmd_greedy(a):
    got, ref = _ids(a.got), _ids(a.ref)
    if got == ref:
        print(f"{a.label}: greedy ids equal ({len(ref)} ids)")
        return 0
    first = next((i for i, (x, y) in enumerate(zip(got, ref)) if x != y), min(len(got), len(ref)))
    print(f"{a.label}: FAIL greedy ids differ at index {first}: got {len(got)} ids {got} , expected {ref}")
    return 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    lg = sub.add_parser("logits")
    lg.add_argument("got")
    lg.add_argument("ref")
    lg.add_argument("--vocab", type=int, required=True)
    lg.add_argument("--got-rows")
    lg.add_argument("--ref-rows")
    lg.add_argument("--max-rel", type=float)
    lg.add_argument("--max-rel-row", type=float)
    lg.add_argument("--rms-std", type=float)
    lg.add_argument("--min-argmax", type=float)
    lg.add_argument("--lead-rel", type=float, help="per-row bound for the leading rows")
    lg.add_argument("--lead-rows", type=int, help="how many leading rows must be within --lead-rel")
    lg.add_argument("--label", default="logits")
    gr = sub.add_parser("greedy")
    gr.add_argument("got")
    gr.add_argument("ref")
    gr.add_argument("--label", default="greedy")
    a = ap.parse_args(argv)
    return cmd_logits(a) if a.cmd == "logits" else cmd_greedy(a)


if __name__ == "__main__":
    sys.exit(main())
