// SPDX-License-Identifier: Apache-2.0 OR MIT
// The Java workload of the runtime tools' tests (runtimes.rs): prints "ready", waits for a line on stdin, then
// calls System.gc() GCS times and starts and joins THREADS threads named corebpf-worker-<i>, prints "done" and
// halts (no shutdown hooks, so nothing else runs after it).
public class GcLoop {
    public static void main(String[] args) throws Exception {
        int gcs = Integer.parseInt(args[0]);
        int threads = Integer.parseInt(args[1]);
        System.out.println("ready");
        System.out.flush();
        System.in.read();
        for (int i = 0; i < gcs; i++) {
            System.gc();
        }
        for (int i = 0; i < threads; i++) {
            Thread t = new Thread(() -> { }, "corebpf-worker-" + i);
            t.start();
            t.join();
        }
        System.out.println("done");
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }
}
