# An interpreter whose extensions are plugins: PHP loads each one (pdo, ctype, iconv, ... as
# Debian ships them) with dlopen(RTLD_DEEPBIND), which binds their malloc and free to the C
# library's rather than the shim's. An array of 2 million strings, a file's lines sorted, and
# an md5 over them.
description="php: 2M-string array, 400k lines sorted and md5'd, Debian's extensions loaded"
packages=(php-cli)
program="php"
nobody=yes
cost=5
prepare() { compat_gen lines 47 400000 >lines.txt; }
command=(php -d memory_limit=-1 -r '$a = [];
for ($i = 0; $i < 2000000; $i++) { $a[] = str_repeat(chr(97 + $i % 26), $i % 50); }
$s = 0; foreach ($a as $v) { $s += strlen($v); }
$l = file($argv[1]); sort($l);
echo $s, " ", count($l), " ", md5(implode("", $l)), " ", count(get_loaded_extensions()), "\n";' "$IN/lines.txt")
