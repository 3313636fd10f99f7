# A JIT runtime: OpenJDK with the serial collector (heap reserved PROT_NONE, committed as it
# grows), a small program compiled by javac here: a HashMap of a million entries, sorted keys,
# SHA-256 over them.
description="java -XX:+UseSerialGC: HashMap, sort, SHA-256 (compiled by javac)"
packages=(openjdk-17-jdk-headless)
program="java -XX:+UseSerialGC"
nobody=yes
prepare() {
  cat >Compat.java <<'JAVA'
import java.security.MessageDigest;
import java.util.*;
public class Compat {
    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        Random rng = new Random(42);
        HashMap<String, long[]> map = new HashMap<>();
        ArrayList<String> keys = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String k = Long.toHexString(rng.nextLong());
            keys.add(k);
            map.put(k, new long[] {i, rng.nextInt(1000000)});
        }
        Collections.sort(keys);
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        long sum = 0;
        for (String k : keys) {
            long[] v = map.get(k);
            sum += v[1];
            md.update(k.getBytes());
            md.update((byte) (v[0] & 0xff));
        }
        System.out.println(map.size() + " " + sum + " " + HexFormat.of().formatHex(md.digest()));
    }
}
JAVA
  /usr/bin/javac -d . Compat.java
}
command=(/usr/bin/java -XX:+UseSerialGC -XX:-UsePerfData -cp "$IN" Compat 1000000)
