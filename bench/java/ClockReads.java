// ClockReads — reads System.nanoTime() N times (the JVM's monotonic clock:
// clock_gettime(CLOCK_MONOTONIC) through the vDSO) and checks it never goes
// back, then prints "N reads". For bench/virtualize: what a Java program's
// clock reads cost under diehard, on the fast path and the notify path.
public class ClockReads {
    public static void main(String[] args) {
        long n = Long.parseLong(args[0]);
        long last = Long.MIN_VALUE;
        for (long i = 0; i < n; i++) {
            long t = System.nanoTime();
            if (t < last) {
                System.err.println("ClockReads: the clock went back at read " + i);
                System.exit(1);
            }
            last = t;
        }
        System.out.println(n + " reads");
    }
}
