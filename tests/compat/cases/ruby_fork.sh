# An interpreter with threads, its own heap pages and a fork: Debian's ruby fills a hash of
# 900 000 strings from three threads, then a forked child sums the inherited hash and reports
# through a pipe.
description="ruby: 3 threads fill a Hash of 900k strings, a forked child sums it"
packages=(ruby)
program="ruby (threads, fork)"
nobody=yes
prepare() {
  cat >t.rb <<'RB'
threads = 3.times.map do |t|
  Thread.new do
    part = {}
    t.step(899_999, 3) { |i| part[i] = (i * 7).to_s * 4 }
    part
  end
end
h = {}
threads.each { |t| h.merge!(t.value) }
rd, wr = IO.pipe
pid = fork do
  rd.close
  wr.write(h.sum { |k, v| v.size + k % 7 }.to_s)
  wr.close
  exit!(0)
end
wr.close
child = rd.read
Process.wait(pid)
puts "#{h.size} #{child} #{$?.exitstatus} #{h.values.sum(&:size)}"
RB
}
command=(ruby "$IN/t.rb")
