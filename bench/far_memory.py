#!/usr/bin/env python3
"""Far memory: one program under `uswap run` with three tiers (resident under --limit, the
compressed pool under --pool-limit, the rest on --backing), the backing tier local or remote,
alternating A B C D per round:
  file        a local file (zram's backing_dev as the kernel has it);
  nbd-unix    nbdkit memory over a Unix socket (another process's RAM on this machine);
  nbd-tcp     nbdkit memory in a network namespace this script creates, over TCP on a veth pair
              (root only);
  nbd-delay   the same with 200 us each way: tc netem, or on a kernel without netem a userspace
              proxy in the namespace that delays every byte 200 us each way (bench/delay_proxy.cc,
              built into build/bench-tools/), or without that 1 ms per request in the server
              (nbdkit's delay filter; its granularity). The notes give the round trip of one
              4 KiB write measured on nbd-tcp and nbd-delay (nbdcopy, one request at a time).
The program: python3 filling SIZE MiB with random bytes (incompressible, so what the pool cannot
hold goes to the backing tier), then touching one byte of every page in a random order (or in
address order, --order sequential, where readahead reads runs of pages together) PASSES times,
and printing a checksum (equal on every run, or the run counts as failed).

Per run: wall time, the interpreter's faults, the job's swap-in faults among them, the fault
latency percentiles uswap measured (p50, p99; buckets about 19% wide), and where the pages were: peak resident, the pool's peak, pages written to and read from
the backing tier.

Usage: bench/far_memory.py --uswap build/bin/uswap [--size 256] [--passes 2] [--rounds 3]
       [--order random|sequential] [--json out.json]
Prints a progress line per run on stderr and a markdown table on stdout.
"""

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

PROGRAM = r"""
import os, random, sys
size = int(sys.argv[1]) << 20
passes = int(sys.argv[2])
shuffle = sys.argv[3] == "random"
buf = bytearray(os.urandom(size))
order = list(range(0, size, 4096))
rng = random.Random(1)
total = 0
for p in range(passes):
    if shuffle:
        rng.shuffle(order)
    for off in order:
        total = (total * 31 + buf[off]) & 0xffffffffffffffff
        buf[off] = (buf[off] + 1) & 0xff
print(len(buf), passes)
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def wait_for_file(path, proc, what):
    for _ in range(1000):
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited {proc.returncode}")
        time.sleep(0.01)
    raise RuntimeError(f"{what} did not start")


class Server:
    """nbdkit memory, on a Unix socket or in a network namespace over TCP."""

    def __init__(self, tmp, kind, size, delay_proxy=None):
        self.tmp, self.kind, self.proc, self.ns, self.note = tmp, kind, None, None, ""
        self.proxy = None
        try:
            self._start(tmp, kind, size, delay_proxy)
        except BaseException:
            self.close()
            raise

    def _start(self, tmp, kind, size, delay_proxy):
        pidfile = os.path.join(tmp, f"{kind}.pid")
        mem = ["memory", f"{size}M"]
        if kind == "nbd-unix":
            sock = os.path.join(tmp, "nbd.sock")
            cmd = ["nbdkit", "-f", "--exit-with-parent", "-U", sock, "-P", pidfile] + mem
            self.uri = f"nbd+unix:///?socket={sock}"
        else:
            t = "t" if kind == "nbd-tcp" else "d"
            net = "10.213.78" if kind == "nbd-tcp" else "10.213.79"
            self.ns = f"uswapfm{os.getpid()}{t}"
            self.host, self.peer = f"fm{os.getpid()}{t}a", f"fm{os.getpid()}{t}b"
            run = lambda *a: subprocess.run(a, check=True, capture_output=True)
            run("ip", "netns", "add", self.ns)
            run("ip", "link", "add", self.host, "type", "veth", "peer", "name", self.peer)
            run("ip", "link", "set", self.peer, "netns", self.ns)
            run("ip", "addr", "add", f"{net}.1/30", "dev", self.host)
            run("ip", "link", "set", self.host, "up")
            run("ip", "netns", "exec", self.ns, "ip", "addr", "add", f"{net}.2/30", "dev",
                self.peer)
            run("ip", "netns", "exec", self.ns, "ip", "link", "set", self.peer, "up")
            run("ip", "netns", "exec", self.ns, "ip", "link", "set", "lo", "up")
            filters = []
            listen = ["-i", f"{net}.2", "-p", "10809"]
            if kind == "nbd-delay":
                netem = subprocess.run(["tc", "qdisc", "add", "dev", self.host, "root", "netem",
                                        "delay", "200us"], capture_output=True)
                if netem.returncode == 0:
                    run("ip", "netns", "exec", self.ns, "tc", "qdisc", "add", "dev", self.peer,
                        "root", "netem", "delay", "200us")
                    self.note = "netem 200 us each way"
                elif delay_proxy and os.access(delay_proxy, os.X_OK):
                    # nbdkit on the namespace's loopback; the proxy takes the veth address.
                    listen = ["-i", "127.0.0.1", "-p", "10810"]
                    ready = os.path.join(tmp, "proxy.ready")
                    self.proxy = subprocess.Popen(
                        ["ip", "netns", "exec", self.ns, delay_proxy, f"{net}.2:10809",
                         "127.0.0.1:10810", "200", ready],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    wait_for_file(ready, self.proxy, "delay_proxy")
                    self.note = ("no netem in this kernel: a userspace proxy in the namespace "
                                 "delays every byte 200 us each way (bench/delay_proxy.cc)")
                else:
                    filters = ["--filter=delay"]
                    mem += ["delay-read=1ms", "delay-write=1ms"]
                    self.note = "no netem in this kernel: 1 ms per request in the server"
            cmd = (["ip", "netns", "exec", self.ns, "nbdkit", "-f", "--exit-with-parent",
                    "-P", pidfile] + listen + filters + mem)
            self.uri = f"nbd://{net}.2:10809/"
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_file(pidfile, self.proc, "nbdkit")

    def close(self):
        for p in (getattr(self, "proc", None), getattr(self, "proxy", None)):
            if p:
                p.kill()
                p.wait()
        if self.ns:
            subprocess.run(["ip", "link", "del", self.host], capture_output=True)
            subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)


def round_trip_us(tmp, uri):
    """The median of three times one 4 KiB write at a time, 256 of them, through uri (nbdcopy
    into the export's first MiB, which no run has written yet): one request's round trip."""
    src = os.path.join(tmp, "rtt.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(1 << 20))
    times = []
    for _ in range(3):
        t0 = time.monotonic()
        p = subprocess.run(["nbdcopy", "--synchronous", "--requests=1", "--connections=1",
                            "--request-size=4096", src, uri], capture_output=True)
        if p.returncode != 0:
            return None
        times.append((time.monotonic() - t0) / 256 * 1e6)
    return statistics.median(times)


def run_once(args, backing, prog_path, expect):
    limit = args.size // 4
    cmd = [args.uswap, "run", "--limit", f"{limit}M", "--pool-limit", f"{limit // 2}M",
           "--backing", backing, "--json", "--", sys.executable, prog_path, str(args.size),
           str(args.passes), args.order]
    if not backing.startswith("nbd"):
        # Twice the working set and room for the interpreter's own pages past the pool.
        cmd[cmd.index("--json"):cmd.index("--json")] = ["--backing-size",
                                                        f"{args.size * 2 + 64}M"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    wall = time.monotonic() - t0
    j = {}
    for line in reversed(p.stderr.splitlines()):
        if line.startswith("{"):
            j = json.loads(line)
            break
    job = j.get("job", {})
    # The interpreter that did the work: the record with the most faults (a wrapper that execs
    # the interpreter, such as pyenv's shim, leaves a record of its own under the same name).
    procs = [x for x in j.get("processes", []) if x.get("program", "").startswith("python")]
    pr = max(procs, key=lambda x: x.get("faults", 0)) if procs else {}
    ok = p.returncode == 0 and p.stdout == expect
    return {"wall_s": wall, "ok": ok, "exit_status": p.returncode,
            "fault_p50_ns": pr.get("fault_p50_ns", 0), "fault_p99_ns": pr.get("fault_p99_ns", 0),
            # Faults of all kinds and the swap-in ones among them: with zero fills and swap-ins
            # near half each, the median moves between them when readahead changes the count.
            "faults": pr.get("faults", 0), "major_faults": job.get("pgmajfault", 0),
            "peak_resident_bytes": job.get("peak_resident_bytes", 0),
            "pool_peak_bytes": pr.get("zram_mem_used_max", 0),
            "bd_writes": job.get("bd_writes", 0), "bd_reads": job.get("bd_reads", 0),
            "swap_outs": job.get("swap_outs", 0), "swap_ins": job.get("swap_ins", 0),
            "stderr_tail": "" if ok else p.stderr[-600:]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uswap", required=True)
    ap.add_argument("--size", type=int, default=256, help="working set, MiB")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--order", choices=("random", "sequential"), default="random")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--json")
    ap.add_argument("--delay-proxy", help="the delay proxy for nbd-delay where the kernel has no "
                    "netem (default: bench-tools/delay_proxy in the build tree of --uswap)")
    args = ap.parse_args()
    if args.delay_proxy is None:
        args.delay_proxy = os.path.join(os.path.dirname(os.path.dirname(
            os.path.abspath(args.uswap))), "bench-tools", "delay_proxy")
    if args.size < 16:
        ap.error("--size must be at least 16 (MiB)")
    for tool in ("nbdkit",):
        if not shutil.which(tool):
            log(f"far_memory: {tool} not found")
            return 2
    tmp = tempfile.mkdtemp(prefix="uswap-far-")
    prog_path = os.path.join(tmp, "touch.py")
    with open(prog_path, "w") as f:
        f.write(PROGRAM)
    expect = f"{args.size << 20} {args.passes}\n"
    kinds = ["file", "nbd-unix"]
    notes = []
    if os.geteuid() == 0 and shutil.which("ip"):
        kinds += ["nbd-tcp", "nbd-delay"]
    else:
        notes.append("nbd-tcp and nbd-delay need root (a network namespace): skipped")
    servers = {}
    load_before = os.getloadavg()
    results = {k: [] for k in kinds}
    try:
        for k in kinds[1:]:
            try:
                servers[k] = Server(tmp, k, args.size * 2 + 64, args.delay_proxy)
            except (OSError, RuntimeError, subprocess.CalledProcessError) as e:
                log(f"far_memory: cannot set up {k}: {e}")
                return 2
            if servers[k].note:
                notes.append(f"{k}: {servers[k].note}")
        if "nbd-delay" in servers and shutil.which("nbdcopy"):
            rtt = {k: round_trip_us(tmp, servers[k].uri) for k in ("nbd-tcp", "nbd-delay")}
            if None not in rtt.values():
                notes.append(f"one 4 KiB write's round trip (nbdcopy, one request at a time, "
                             f"median of 3 x 256): nbd-tcp {rtt['nbd-tcp']:.0f} us, "
                             f"nbd-delay {rtt['nbd-delay']:.0f} us")
        for r in range(args.rounds):
            for k in kinds:
                backing = os.path.join(tmp, "backing") if k == "file" else servers[k].uri
                res = run_once(args, backing, prog_path, expect)
                results[k].append(res)
                log(f"far_memory: round {r + 1}/{args.rounds} {k}: {res['wall_s']:.1f} s, "
                    f"{'ok' if res['ok'] else 'FAILED ' + str(res['exit_status'])}, "
                    f"p50 {res['fault_p50_ns'] / 1e3:.1f} us p99 {res['fault_p99_ns'] / 1e3:.1f} us, "
                    f"{res['bd_writes']} pages out to the backing tier, {res['bd_reads']} back")
                if k == "file":
                    try:
                        os.unlink(backing)
                    except OSError:
                        pass
    finally:
        for s in servers.values():
            s.close()
        shutil.rmtree(tmp, ignore_errors=True)

    def med(k, field):
        xs = [x[field] for x in results[k] if x["ok"]]
        return statistics.median(xs) if xs else None

    rows = []
    for k in kinds:
        wall = med(k, "wall_s")
        pairs = [x["wall_s"] / f["wall_s"] for x, f in zip(results[k], results["file"])
                 if x["ok"] and f["ok"]]
        rows.append({"backing": k, "done": sum(x["ok"] for x in results[k]),
                     "runs": len(results[k]), "wall_s": wall,
                     # each round's runs side by side: the median of the per-round ratios
                     "ratio_to_file": statistics.median(pairs) if pairs else None,
                     **{f: med(k, f) for f in ("fault_p50_ns", "fault_p99_ns", "faults",
                                                "major_faults",
                                                "peak_resident_bytes", "pool_peak_bytes",
                                                "bd_writes", "bd_reads")}})
    out = {"machine": {"cpus": os.cpu_count(), "kernel": platform.release(),
                       "load_before": list(load_before), "load_after": list(os.getloadavg())},
           "size_mib": args.size, "passes": args.passes, "order": args.order, "rounds": args.rounds,
           "limit_mib": args.size // 4, "pool_limit_mib": args.size // 8,
           "notes": notes, "rows": rows, "runs": results}
    print("| backing | done | time (median) | / file | fault p50 | fault p99 | peak resident "
          "| pool peak | pages out | pages back |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        f = lambda v, fmt: fmt.format(v) if v is not None else "-"
        print(f"| {r['backing']} | {r['done']}/{r['runs']} | {f(r['wall_s'], '{:.1f} s')} | "
              f"{f(r['ratio_to_file'], '{:.2f}')} | {f(r['fault_p50_ns'] and r['fault_p50_ns'] / 1e3, '{:.1f} us')} | "
              f"{f(r['fault_p99_ns'] and r['fault_p99_ns'] / 1e3, '{:.1f} us')} | "
              f"{f(r['peak_resident_bytes'] and r['peak_resident_bytes'] / 1048576, '{:.0f} MiB')} | "
              f"{f(r['pool_peak_bytes'] and r['pool_peak_bytes'] / 1048576, '{:.0f} MiB')} | "
              f"{f(r['bd_writes'], '{:.0f}')} | {f(r['bd_reads'], '{:.0f}')} |")
    for n in notes:
        print(f"- {n}")
    if args.json:
        with open(args.json, "w") as fj:
            json.dump(out, fj, indent=1)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
