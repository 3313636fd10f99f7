# A browser: Firefox ESR headless renders a page whose script builds 1.5 million objects and
# writes a sum into the page, and saves a screenshot (its PNG compared). Several processes
# (the parent, content processes, a socket process, a fork server), threads, mozjemalloc, and
# as nobody its content sandbox: a seccomp filter that traps the calls it refuses to a SIGSYS
# handler of its own, which must see only Firefox's calls, never the pager's.
description="firefox-esr --headless --screenshot of a page with a 1.5M-object script; PNG"
packages=(firefox-esr)
program="firefox-esr"
nobody=yes
case_env=(MOZ_CRASHREPORTER_DISABLE=1)
prepare() {
  python3 - <<'PY'
rows = "".join(f"<tr><td>{i}</td><td>{i * i}</td></tr>" for i in range(300))
script = ("let a=[];for(let i=0;i<1500000;i++)a.push({k:i,s:'v'+i});"
          "document.getElementById('t').textContent=a.reduce((x,y)=>x+y.k,0)+' '+a[777].s;")
open("page.html", "w").write(f"<html><body><h1 id=t>t</h1><table>{rows}</table>"
                             f"<script>{script}</script></body></html>")
PY
}
command=(bash -c 'set -e; mkdir -p profile
/usr/bin/firefox-esr --headless --profile "$PWD/profile" --screenshot "$PWD/shot.png" "file://$IN/page.html"
test -s shot.png')
outputs=(shot.png)
