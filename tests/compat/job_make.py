#!/usr/bin/env python3
"""A whole parallel build under one `uswap run --limit`: make -j2 compiling eight of uswap's own
C++ sources with g++ -O2 (bench/memcg_vs_uswap.py's build case), the limit half the plain
build's own peak. Checks, measuring from outside the job:
  - the same exit status and the same symbols in the objects as the plain build;
  - at every sample (every 20 ms) the summed RssAnon of the whole process tree, minus the job's
    compressed pools at that moment (--stats-dir's mm_stat, which lives inside those processes'
    anonymous memory), stays within the limit + 32 MiB (what stays unrouted: stacks, glibc's own
    mappings, the pagers' metadata);
  - the job really paged (swap-outs in its JSON).
Usage: job_make.py --uswap build/bin/uswap [--results FILE]
Exit status 0 when every check holds."""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import memcg_vs_uswap as p8  # noqa: E402  the build case and the tree sampler

SLACK = 32 << 20
SAMPLE_S = 0.02


def pool_now(stats_dir):
    fields = p8.read(os.path.join(stats_dir, "mm_stat")).split()
    return int(fields[2]) if len(fields) > 2 else 0


def run(argv, env, cwd, stats_dir=None):
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    t0 = time.monotonic()
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    peak_rss = peak_net = 0
    worst = None
    while p.poll() is None:
        rss = p8.tree_rss_anon(p.pid)
        pool = pool_now(stats_dir) if stats_dir else 0
        peak_rss = max(peak_rss, rss)
        if rss - pool > peak_net:
            peak_net = rss - pool
            worst = (rss, pool)
        time.sleep(SAMPLE_S)
    out.seek(0)
    err.seek(0)
    return {"exit_status": p.returncode, "wall_s": round(time.monotonic() - t0, 2),
            "stdout": out.read().decode(errors="replace"),
            "stderr": err.read().decode(errors="replace"),
            "peak_rss_anon": peak_rss, "peak_rss_anon_minus_pool": peak_net, "worst": worst}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--uswap", required=True)
    ap.add_argument("--results")
    a = ap.parse_args()
    uswap = os.path.abspath(a.uswap)
    scratch = tempfile.mkdtemp(prefix="uswap-job-make.")
    failures = []
    try:
        in_dir = os.path.join(scratch, "in")
        os.makedirs(in_dir)
        case = p8.build_case()
        case.prepare(in_dir)
        argv, _ = case.describe(in_dir)
        env = {"PATH": p8.CLEAN_PATH, "HOME": scratch, "TMPDIR": scratch, "LC_ALL": "C"}
        plain_dir = os.path.join(scratch, "plain")
        os.makedirs(plain_dir)
        plain = run(argv, env, plain_dir)
        limit = (plain["peak_rss_anon"] // 2) & ~4095
        stats_dir = os.path.join(scratch, "stats")
        job_dir = os.path.join(scratch, "job")
        os.makedirs(job_dir)
        job = run([uswap, "run", "--limit", str(limit), "--stats-dir", stats_dir, "--json", "--"] + argv,
                  env, job_dir, stats_dir)
        summary = {}
        for line in reversed(job["stderr"].splitlines()):
            if line.startswith('{"exit_status"'):
                summary = json.loads(line)
                break
        mib = lambda b: f"{b / 1048576:.1f} MiB"
        print(f"plain make -j2: {plain['wall_s']} s, tree's peak RssAnon {mib(plain['peak_rss_anon'])}")
        print(f"uswap run --limit {mib(limit)}: {job['wall_s']} s, tree's peak RssAnon "
              f"{mib(job['peak_rss_anon'])}, peak RssAnon - pools {mib(job['peak_rss_anon_minus_pool'])}"
              f" (at {mib(job['worst'][0]) if job['worst'] else '-'} with pools "
              f"{mib(job['worst'][1]) if job['worst'] else '-'}); job: {json.dumps(summary.get('job', {}))}")
        if job["exit_status"] != plain["exit_status"]:
            failures.append(f"exit status {job['exit_status']}, plain {plain['exit_status']}: {job['stderr'][-800:]}")
        if job["stdout"] != plain["stdout"]:
            failures.append(f"the objects differ: plain {plain['stdout'].strip()}, uswap {job['stdout'].strip()}")
        if job["peak_rss_anon_minus_pool"] > limit + SLACK:
            failures.append(f"the tree's RssAnon minus its pools reached {mib(job['peak_rss_anon_minus_pool'])},"
                            f" above the limit {mib(limit)} + 32 MiB")
        if summary.get("job", {}).get("swap_outs", 0) == 0:
            failures.append("the job paged nothing: the limit did not bite")
        if a.results:
            with open(a.results, "w") as f:
                json.dump({"case": "job_make", "limit_bytes": limit, "plain": {k: plain[k] for k in
                           ("exit_status", "wall_s", "peak_rss_anon")},
                           "uswap": {k: job[k] for k in ("exit_status", "wall_s", "peak_rss_anon",
                                                         "peak_rss_anon_minus_pool")},
                           "job": summary.get("job"), "failures": failures,
                           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, f)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for f in failures:
        print("FAIL: " + f)
    print("job_make: " + ("ok" if not failures else f"{len(failures)} failure(s)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
