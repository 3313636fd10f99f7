#!/usr/bin/env python3
"""The man pages cover the real command line.

Usage: man_options_test.py USWAP PLUGIN_SO MAN_DIR POD_DIR

uswap(1) (POD_DIR/uswap.pod): every subcommand, found recursively from `uswap --help` and
`uswap SUB --help`, has its own `=head2 uswap SUB` section; every option of it (each of its names,
-s and --long) is an `=item` there, and the default --help shows for it appears in that item
(sizes as the page writes them: 64M for 64.00 MiB).
--help and --version appear on the page. nbdkit-uswap-plugin(1): every key=... parameter of the
plugin's config_help (`nbdkit PLUGIN_SO --help`) is an `=item B<key=>`, and the magic key is
the `[size=]` one. Both rendered pages (MAN_DIR/*.1) open with a NAME section under `man -l`.
Exit status 1, naming each missing piece, when anything is missing.
"""
import os
import re
import subprocess
import sys

uswap, plugin, man_dir, pod_dir = sys.argv[1:5]
problems = []


def run(args):
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        problems.append(f"{' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def sections(text):
    """CLI11 help: {'Options': [lines], 'Subcommands': [lines], ...}"""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^([A-Z][A-Za-z ]*):\s*$", line)
        if m:
            cur = out.setdefault(m.group(1), [])
        elif cur is not None:
            cur.append(line)
    return out


def options(help_text):
    """[(names, default or None)] from the Options section; names as '-s', '--long'."""
    result = []
    for line in sections(help_text).get("Options", []):
        m = re.match(r"^  (-\S+)(.*)$", line)  # an option starts 2 columns in; text continues deeper
        if not m:
            continue
        names = [re.sub(r"\{.*\}$", "", n) for n in m.group(1).split(",") if n.startswith("-")]
        # "--limit SIZE=256.00 MiB   description": CLI11 shows the default after the type's '='.
        rest = m.group(2)
        typ = re.split(r"\s{2,}", rest[1:], maxsplit=1)[0] if rest.startswith(" ") and not rest.startswith("  ") else ""
        default = typ.split("=", 1)[1] if "=" in typ else None
        result.append((names, normalise(default) if default is not None else None))
    return result


def normalise(default):
    """A default as the page writes it: 64M for '64.00 MiB', 0 for '0 B', 2,16 for '[2,16] ...',
    and for an absolute path (where the build tree was) its file name."""
    default = default.strip()
    default = re.sub(r"\s*\.\.\.$", "", default).strip("[]")
    m = re.match(r"^(\d+)\.00 ([KMGT])iB$", default)
    if m:
        return m.group(1) + m.group(2)
    if default == "0 B":
        return "0"
    if default.startswith("/"):
        return os.path.basename(default)
    return default


def subcommands(help_text):
    return [l.split()[0] for l in sections(help_text).get("Subcommands", []) if re.match(r"^  \S", l)]


# --- uswap(1)
pod = open(os.path.join(pod_dir, "uswap.pod")).read()


def pod_section(title):
    m = re.search(r"^=head2 " + re.escape(title) + r"\s*$(.*?)(?=^=head[12] |\Z)", pod, re.M | re.S)
    return m.group(1) if m else None


def pod_items(text):
    """=item paragraphs: [(item line, body up to the next =item / =back)]"""
    parts = re.split(r"^=item ", text, flags=re.M)[1:]
    return [(p.split("\n", 1)[0], p) for p in parts]


commands, queue = [], [[]]
while queue:
    path = queue.pop(0)
    text = run([uswap, *path, "--help"])
    if path:
        commands.append((path, text))
    queue += [path + [s] for s in subcommands(text)]
if len(commands) < 10:
    problems.append(f"only {len(commands)} subcommands parsed from uswap --help: the parser is broken")

checked = 0
for path, text in commands:
    title = "uswap " + " ".join(path)
    sec = pod_section(title)
    if sec is None:
        problems.append(f"uswap.pod: no '=head2 {title}' section")
        continue
    items = pod_items(sec)
    for names, default in options(text):
        if "--help" in names:
            continue
        for name in names:
            hits = [body for head, body in items if re.search(r"B<" + re.escape(name) + r"(?![\w-])", head)]
            if not hits:
                problems.append(f"uswap.pod, {title}: option {name} has no =item")
            elif default is not None and default != "" and not any(default in b for b in hits):
                problems.append(f"uswap.pod, {title}: {name}: the default [{default}] is not in its item")
            checked += 1
for flag in ("--help", "--version"):
    if flag not in pod:
        problems.append(f"uswap.pod: {flag} not mentioned")
if checked < 50:
    problems.append(f"only {checked} option names checked: the --help parser is broken")

# --- nbdkit-uswap-plugin(1)
plugin_pod = open(os.path.join(pod_dir, "nbdkit-uswap-plugin.pod")).read()
help_text = run(["nbdkit", plugin, "--help"])
keys = re.findall(r"^([a-z_]+)=", help_text, re.M)
if "size" not in keys or len(keys) < 5:
    problems.append(f"nbdkit {plugin} --help: parameters not found (got {keys})")
for key in keys:
    pattern = r"^=item \[B<size=>\]" if key == "size" else r"^=item B<" + re.escape(key) + r"=>"
    if not re.search(pattern, plugin_pod, re.M):
        problems.append(f"nbdkit-uswap-plugin.pod: parameter {key}= has no =item")

# --- rendered pages
for page in ("uswap", "nbdkit-uswap-plugin"):
    text = run(["man", "-l", os.path.join(man_dir, page + ".1")])
    if not re.search(r"^NAME\s*$", text, re.M) or page not in text:
        problems.append(f"man -l {page}.1 does not render a NAME section naming {page}")

for p in problems:
    print("FAIL:", p)
print(f"{len(commands)} subcommands, {checked} option names, {len(keys)} plugin parameters checked")
sys.exit(1 if problems else 0)
