#!/usr/bin/env python3
"""Split an in-run A/B results.json into two results files, one per backend, both named
as A, so that `kpbench compare OLD NEW` can judge the pair (docs/ci.md's noise table:
compare on two passes of one run, A = B and injected slowdowns).
usage: hack/split-ab.py RUN_DIR A B OUT_OLD OUT_NEW"""
import json, os, sys
run, a, b, out_old, out_new = sys.argv[1:6]
r = json.load(open(os.path.join(run, "results.json")))
for be, out in ((a, out_old), (b, out_new)):
    s = dict(r)
    s["runs"] = []
    for x in r["runs"]:
        if x["backend"] == be:
            y = dict(x)
            y["backend"] = a
            s["runs"].append(y)
    os.makedirs(out, exist_ok=True)
    json.dump(s, open(os.path.join(out, "results.json"), "w"))
