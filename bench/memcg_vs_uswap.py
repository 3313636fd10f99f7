#!/usr/bin/env python3
"""Benchmark P8: real programs and a parallel build under `uswap run --limit` against the
kernel's own memory cgroup with swap on zram, at the same limit, alternating.

For each case (the compatibility suite's programs, tests/compat/cases/*.sh, and `build`: make -j2
compiling eight of uswap's own C++ sources with g++ -O2; `xz8`: xz -8 single-threaded over the
xz case's text) the script measures the program's own
peak once, plain, then for each fraction of that peak (default 50% and 25%) runs, in alternating
order per round:
  kernel  the command in a memory cgroup (v1 memory.limit_in_bytes, or v2 memory.max) at the
          limit, with swap on /dev/zram0 (lz4; set up by this script and undone afterwards);
  uswap   `uswap run --limit L --json -- command` (one limit for the whole process tree).
Each run reports: wall time, whether it completed with the plain run's exit status and output
(sha256 of stdout), OOM kills (kernel: memory.oom_control's oom_kill), and the footprint: the
largest sum, sampled every 50 ms, of the tree's anonymous resident memory (RssAnon of every
process of the run) plus, for the kernel, zram's mem_used_total (the compressed pool lives in
the kernel there; under uswap it is inside the processes' own memory, so RssAnon has it).

The plain peak is the largest sampled sum of RssAnon over the plain run's process tree.

Usage (root; nothing else should be using zram0 or swap):
  bench/memcg_vs_uswap.py --uswap build/bin/uswap [--cases sort_pipeline,xz,build]
        [--fractions 0.5,0.25] [--rounds 3] [--json results.json] [--timeout 900]
Output: a progress line per run on stderr, the table (markdown) on stdout, the JSON with
--json. Exit status 0 when it ran (whatever the cases did), 2 on bad usage or set-up failure.
"""

import argparse
import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CASES_DIR = os.path.join(ROOT, "tests", "compat", "cases")
GEN = os.path.join(ROOT, "tests", "compat", "gen.py")
CLEAN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
SAMPLE_S = 0.05

# The build case: eight of uswap's own sources, compiled as a C++ project's make -j2 would.
BUILD_SOURCES = [
    "src/uffd/kernel_access.cc", "src/zram/zram_drv.cc", "src/swap/swap_area.cc",
    "src/uffd/pager.cc", "src/zsmalloc/zsmalloc.cc", "src/mm/vmscan.cc",
    "src/mm/rmap.cc", "src/swap/swap_system.cc",
]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


# ---------------------------------------------------------------------------------------------
# Cases.

class Case:
    def __init__(self, name, command, prepare, env=()):
        self.name = name
        self.command = command      # argv, with $IN already substituted where it appears
        self.prepare = prepare      # callable(in_dir)
        self.env = list(env)


def compat_case(name):
    """A case of the compatibility suite: its prepare() and command, through bash."""
    path = os.path.join(CASES_DIR, name + ".sh")
    if not os.path.exists(path):
        raise SystemExit(f"memcg_vs_uswap: no case {name} ({path})")
    probe = ("compat_gen() { /usr/bin/python3 %s \"$@\"; }; source %s; "
             "printf '%%s\\0' \"${command[@]}\"; printf '\\1'; "
             "for e in ${case_env[@]+\"${case_env[@]}\"}; do printf '%%s\\0' \"$e\"; done"
             % (shlex.quote(GEN), shlex.quote(path)))

    def describe(in_dir):
        out = subprocess.run(["bash", "-c", probe], env={"IN": in_dir, "PATH": CLEAN_PATH},
                             capture_output=True, check=True).stdout
        cmd, _, env = out.partition(b"\x01")
        return ([a.decode() for a in cmd.split(b"\0") if a],
                [e.decode() for e in env.split(b"\0") if e])

    def prepare(in_dir):
        subprocess.run(["bash", "-c", "compat_gen() { /usr/bin/python3 %s \"$@\"; }; source %s; "
                        "cd \"$IN\" && prepare" % (shlex.quote(GEN), shlex.quote(path))],
                       env={"IN": in_dir, "PATH": CLEAN_PATH, "LC_ALL": "C"}, check=True)

    case = Case(name, None, prepare)
    case.describe = describe
    return case


def build_case():
    def prepare(in_dir):
        shutil.copytree(os.path.join(ROOT, "include"), os.path.join(in_dir, "include"))
        srcs = os.path.join(in_dir, "src")
        objs = []
        for s in BUILD_SOURCES:
            dst = os.path.join(srcs, s[len("src/"):])
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy(os.path.join(ROOT, s), dst)
            # Their private headers, beside them.
            for h in os.listdir(os.path.join(ROOT, os.path.dirname(s))):
                if h.endswith(".h"):
                    shutil.copy(os.path.join(ROOT, os.path.dirname(s), h), os.path.dirname(dst))
            objs.append(s[len("src/"):].replace("/", "_").replace(".cc", ".o"))
        rules = []
        for s, o in zip(BUILD_SOURCES, objs):
            rules.append(f"{o}: $(IN)/{s}\n\t$(CXX) $(CXXFLAGS) -c $< -o $@\n")
        write(os.path.join(in_dir, "Makefile"),
              "CXX = g++\nCXXFLAGS = -O2 -std=c++20 -I$(IN)/include\n"
              f"all: {' '.join(objs)}\n\t@nm -C {' '.join(objs)} | sort | sha256sum\n\n"
              + "\n".join(rules))

    def describe(in_dir):
        # -B: every run compiles everything (the objects of the run before are in its cwd).
        return (["make", "-B", "-j2", "-s", "-f", os.path.join(in_dir, "Makefile"), f"IN={in_dir}"], [])

    case = Case("build", None, prepare)
    case.describe = describe
    return case


def xz8_case():
    """xz -8 single-threaded over the xz case's 12 MB of text: write tracking's worst case (a
    bt4 match finder writes its hash and tree pages at random, every byte of input)."""
    base = compat_case("xz")

    def describe(in_dir):
        return (["xz", "-8", "-c", os.path.join(in_dir, "text.txt")], [])

    case = Case("xz8", None, base.prepare)
    case.describe = describe
    return case


# ---------------------------------------------------------------------------------------------
# Sampling the tree's anonymous memory.

def children_map():
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        stat = read(f"/proc/{d}/stat")
        r = stat.rfind(")")
        if r < 0:
            continue
        fields = stat[r + 2:].split()
        if len(fields) < 2:
            continue
        kids.setdefault(int(fields[1]), []).append(int(d))
    return kids


def tree_rss_anon(root):
    kids = children_map()
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        for line in read(f"/proc/{pid}/status").splitlines():
            if line.startswith("RssAnon:"):
                total += int(line.split()[1]) * 1024
                break
        todo.extend(kids.get(pid, []))
    return total


# ---------------------------------------------------------------------------------------------
# The kernel side: zram swap and a memory cgroup.

class KernelSide:
    def __init__(self, zram_size=8 << 30):
        self.zram_size = zram_size
        self.dev = None
        self.cgroup = None
        self.v1 = os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes")

    def __enter__(self):
        if os.geteuid() != 0:
            raise SystemExit("memcg_vs_uswap: the kernel side needs root (zram, swapon, cgroups)")
        if read("/sys/block/zram0/disksize").strip() != "0":
            raise SystemExit("memcg_vs_uswap: /sys/block/zram0 is in use (disksize is not 0)")
        self.dev = "zram0"
        write("/sys/block/zram0/comp_algorithm", "lz4")
        write("/sys/block/zram0/disksize", str(self.zram_size))
        subprocess.run(["mkswap", "/dev/zram0"], check=True, capture_output=True)
        subprocess.run(["swapon", "-p", "32767", "/dev/zram0"], check=True)
        name = f"uswap-p8-{os.getpid()}"
        if self.v1:
            self.cgroup = "/sys/fs/cgroup/memory/" + name
        else:
            root = "/sys/fs/cgroup"
            if "memory" not in read(root + "/cgroup.controllers"):
                root = "/sys/fs/cgroup/unified"
            write(root + "/cgroup.subtree_control", "+memory")
            self.cgroup = root + "/" + name
        os.mkdir(self.cgroup)
        return self

    def __exit__(self, *exc):
        if self.cgroup:
            for _ in range(100):
                try:
                    os.rmdir(self.cgroup)
                    break
                except OSError:
                    time.sleep(0.05)
        if self.dev:
            subprocess.run(["swapoff", "/dev/zram0"], check=False)
            write("/sys/block/zram0/reset", "1")

    def set_limit(self, limit):
        write(self.cgroup + ("/memory.limit_in_bytes" if self.v1 else "/memory.max"), str(limit))

    def oom_kills(self):
        if self.v1:
            for line in read(self.cgroup + "/memory.oom_control").splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
            return 0
        for line in read(self.cgroup + "/memory.events").splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0

    def major_faults(self):
        """The cgroup's major faults so far (memory.stat pgmajfault, v1 and v2): its swap-ins,
        and the few file pages it read."""
        for line in read(self.cgroup + "/memory.stat").splitlines():
            if line.startswith("pgmajfault "):
                return int(line.split()[1])
        return 0

    def kmsg_lines(self):
        """The kernel log as it is now (dmesg), to find what an OOM kill left in it."""
        r = subprocess.run(["dmesg"], capture_output=True, text=True, errors="replace")
        return r.stdout.splitlines() if r.returncode == 0 else []

    def oom_report(self, before):
        """Where and why the kernel's last OOM kill in this cgroup happened, from its report in
        the kernel log (lines stamped after `before`, an earlier kmsg_lines()): the fault path that
        charged (the first frame after the charge functions), and the cgroup's anon LRU lists
        and swap at the kill, which say whether reclaim had anything it could evict."""
        def stamp(line):
            try:
                return float(line[1:line.index("]")])
            except ValueError:
                return -1.0

        # The log is a ring: what is new is what is stamped after its last line then.
        since = stamp(before[-1]) if before else -1.0
        lines = [l for l in self.kmsg_lines() if stamp(l) > since]
        start = max((i for i, l in enumerate(lines) if "invoked oom-killer" in l), default=None)
        if start is None:
            return None
        rep = {}
        frames = [l.split("]", 1)[-1].strip().split("+")[0] for l in lines[start:start + 60]]
        charge = [i for i, f in enumerate(frames) if "charge" in f]
        if charge:
            after = [f for f in frames[charge[-1] + 1:] if f and not f.startswith("?")]
            faults = [f for f in after if f.startswith("do_")]
            if after:
                rep["fault_path"] = faults[0] if faults else after[0]
            rep["charge"] = frames[charge[-1]]
        name = os.path.basename(self.cgroup)
        stats = max((i for i, l in enumerate(lines) if f"stats for /{name}" in l), default=None)
        if stats is not None:
            for l in lines[stats + 1:stats + 80]:
                f = l.split("]", 1)[-1].split()
                if len(f) == 2 and f[0] in ("active_anon", "inactive_anon", "swap", "rss",
                                           "anon") and f[1].isdigit():
                    rep[f[0]] = int(f[1])
        return rep

    def pool_bytes(self):
        fields = read("/sys/block/zram0/mm_stat").split()
        return int(fields[2]) if len(fields) > 2 else 0

    def join_argv(self, argv):
        """argv prefixed so that the process joins the cgroup before it execs."""
        procs = self.cgroup + "/cgroup.procs"
        return ["sh", "-c", f'echo $$ > {shlex.quote(procs)} && exec "$@"', "sh"] + argv


# ---------------------------------------------------------------------------------------------
# One run.

def run(argv, env, cwd, timeout, pool=None):
    """Runs argv; returns (exit status, wall s, stdout sha256, peak footprint, stderr tail)."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    t0 = time.monotonic()
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                         stderr=err, start_new_session=True)
    peak = 0
    timed_out = False
    try:
        while p.poll() is None:
            peak = max(peak, tree_rss_anon(p.pid) + (pool() if pool else 0))
            if time.monotonic() - t0 > timeout:
                os.killpg(p.pid, signal.SIGKILL)
                timed_out = True
                p.wait()
                break
            time.sleep(SAMPLE_S)
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM): the program's session goes too, so that its cgroup
        # empties and the set-up can be undone.
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        raise
    wall = time.monotonic() - t0
    rc = p.returncode if p.returncode >= 0 else 128 - p.returncode
    out.seek(0)
    digest = hashlib.sha256(out.read()).hexdigest()
    err.seek(0)
    # All of it: uswap's JSON line (the last) can be long, one entry per process of the job.
    tail = err.read().decode(errors="replace")
    return {"exit_status": rc, "wall_s": round(wall, 2), "stdout_sha256": digest,
            "footprint_bytes": peak, "timed_out": timed_out, "stderr_tail": tail}


def uswap_json(tail):
    for line in reversed(tail.splitlines()):
        if line.startswith('{"exit_status"'):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--uswap", required=True)
    ap.add_argument("--cases", default="sort_pipeline,xz,zstd_long,sqlite,node,python_dict,gcc,java,build")
    ap.add_argument("--fractions", default="0.5,0.25")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--json")
    ap.add_argument("--uswap-arg", action="append", default=[])
    a = ap.parse_args()
    # SIGTERM and SIGHUP end the run as Ctrl-C does, through the set-up's __exit__: killed
    # outright, it would leave /dev/zram0 swapped on and the cgroup behind.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    uswap = os.path.abspath(a.uswap)
    if not os.access(uswap, os.X_OK):
        ap.error(f"{a.uswap} is not executable")
    fractions = [float(f) for f in a.fractions.split(",")]
    if a.rounds < 1 or any(not 0 < f <= 1 for f in fractions):
        ap.error("--rounds must be >= 1 and each fraction in (0, 1]")
    names = a.cases.split(",")
    special = {"build": build_case, "xz8": xz8_case}
    cases = [special[n]() if n in special else compat_case(n) for n in names]

    scratch = tempfile.mkdtemp(prefix="uswap-p8.")
    os.chmod(scratch, 0o755)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_before = os.getloadavg()
    results = []
    try:
        with KernelSide() as kernel:
            for case in cases:
                in_dir = os.path.join(scratch, case.name, "in")
                work = os.path.join(scratch, case.name, "work")
                os.makedirs(in_dir)
                os.makedirs(work)
                case.prepare(in_dir)
                argv, case_env = case.describe(in_dir)
                env = {"PATH": CLEAN_PATH, "HOME": work, "TMPDIR": work, "LC_ALL": "C",
                       "LANG": "C", "IN": in_dir}
                env.update(e.split("=", 1) for e in case_env)
                plain = run(argv, env, work, a.timeout)
                log(f"{case.name}: plain {plain['wall_s']} s, peak {plain['footprint_bytes'] >> 20} MiB, "
                    f"exit {plain['exit_status']}")
                for frac in fractions:
                    limit = max(int(plain["footprint_bytes"] * frac) & ~4095, 16 << 20)
                    kernel.set_limit(limit)
                    row = {"case": case.name, "fraction": frac, "limit_bytes": limit,
                           "plain": plain, "kernel": [], "uswap": []}
                    for r in range(a.rounds):
                        order = ["kernel", "uswap"] if r % 2 == 0 else ["uswap", "kernel"]
                        for side in order:
                            if side == "kernel":
                                ooms = kernel.oom_kills()
                                majflt = kernel.major_faults()
                                kmsg = kernel.kmsg_lines()
                                res = run(kernel.join_argv(argv), env, work, a.timeout, kernel.pool_bytes)
                                res["oom_kills"] = kernel.oom_kills() - ooms
                                res["major_faults"] = kernel.major_faults() - majflt
                                if res["oom_kills"]:
                                    res["oom"] = kernel.oom_report(kmsg)
                            else:
                                cmd = [uswap, "run", *a.uswap_arg, "--limit", str(limit), "--json", "--"] + argv
                                res = run(cmd, env, work, a.timeout)
                                j = uswap_json(res["stderr_tail"])
                                res["uswap"] = {k: j[k] for k in ("job",) if j and k in j}
                                res["oom_kills"] = 0
                            res["completed"] = (res["exit_status"] == plain["exit_status"] and
                                                res["stdout_sha256"] == plain["stdout_sha256"] and
                                                not res["timed_out"])
                            tail = res.pop("stderr_tail")
                            majors = (res["major_faults"] if side == "kernel" else
                                      res["uswap"].get("job", {}).get("pgmajfault", "?"))
                            if not res["completed"]:
                                res["stderr_end"] = tail[-1000:]
                            row[side].append(res)
                            log(f"{case.name} {int(frac * 100)}% round {r + 1} {side}: "
                                f"{'ok' if res['completed'] else 'FAILED'} {res['wall_s']} s, "
                                f"footprint {res['footprint_bytes'] >> 20} MiB, {majors} major faults"
                                + (f", {res['oom_kills']} OOM kills" if res["oom_kills"] else ""))
                    results.append(row)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    doc = {"benchmark": "P8 memcg vs uswap run", "started": started,
           "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "machine": {"cpus": os.cpu_count(), "cpu": cpu_model(), "kernel": platform.release(),
                       "load_before": load_before, "load_after": os.getloadavg()},
           "uswap": uswap, "rounds": a.rounds, "results": results}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
    print(table(doc))
    return 0


def cpu_model():
    for line in read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def med(xs):
    return statistics.median(xs) if xs else None


def table(doc):
    """The markdown table of a results document (also used by docs generation)."""
    lines = ["| case | limit | kernel: done | kernel time | kernel footprint | OOM kills | "
             "uswap: done | uswap time | uswap footprint | uswap / kernel time |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for row in doc["results"]:
        k, u = row["kernel"], row["uswap"]
        kd = [x for x in k if x["completed"]]
        ud = [x for x in u if x["completed"]]
        kt, ut = med([x["wall_s"] for x in kd]), med([x["wall_s"] for x in ud])
        kf, uf = med([x["footprint_bytes"] for x in kd]), med([x["footprint_bytes"] for x in ud])
        ratio = f"{ut / kt:.2f}" if kt and ut else "-"
        lines.append(
            f"| {row['case']} | {int(row['fraction'] * 100)}% = {row['limit_bytes'] >> 20} MiB | "
            f"{len(kd)}/{len(k)} | {fmt_s(kt)} | {fmt_mib(kf)} | {sum(x['oom_kills'] for x in k)} | "
            f"{len(ud)}/{len(u)} | {fmt_s(ut)} | {fmt_mib(uf)} | {ratio} |")
    return "\n".join(lines)


def fmt_s(v):
    return "-" if v is None else f"{v:.1f} s"


def fmt_mib(v):
    return "-" if v is None else f"{v / 1048576:.0f} MiB"


if __name__ == "__main__":
    sys.exit(main())
