# Mono's SGen collector: it stops the world by signalling every thread and reads each one's
# registers and stack pointer from its handler's context (a handler run on a stack of the
# pager's would hand it the wrong stack). Three threads fill lists of strings while the main
# thread fills a dictionary, so that collections stop threads in the middle of their work. The
# program is compiled by mcs here.
description="mono (SGen): three threads and a dictionary of 800 k strings (compiled by mcs)"
packages=(mono-runtime mono-mcs)
program="mono (SGen)"
nobody=yes
cost=10
prepare() {
  cat >sgen.cs <<'CS'
using System;
using System.Collections.Generic;
using System.Threading;
class P {
  static void Main() {
    var d = new Dictionary<int, string>();
    var threads = new List<Thread>();
    long total = 0;
    object l = new object();
    for (int t = 0; t < 3; ++t) {
      int tt = t;
      var th = new Thread(() => {
        var local = new List<string>();
        for (int i = 0; i < 600000; ++i) local.Add((i * 7919 + tt).ToString() + "-payload-" + i);
        long s = 0;
        foreach (var x in local) s += x.Length;
        lock (l) total += s;
      });
      threads.Add(th);
      th.Start();
    }
    for (int i = 0; i < 800000; ++i) d[i] = "value" + (i * 31);
    foreach (var th in threads) th.Join();
    long h = 0;
    foreach (var kv in d) h = h * 31 + kv.Value.Length;
    Console.WriteLine("total " + total + " dict " + d.Count + " h " + h);
  }
}
CS
  mcs -out:sgen.exe sgen.cs
}
command=(mono "$IN/sgen.exe")
