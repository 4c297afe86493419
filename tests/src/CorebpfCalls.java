// SPDX-License-Identifier: Apache-2.0 OR MIT
// The Java workload of the method-tracing tools' tests (runtimes.rs), run with HotSpot's extended probes on and
// its own methods kept out of the JIT: prints "ready", waits for a line on stdin, then calls outer() OUTER times;
// each outer() calls middle() MIDDLE times, each middle() calls inner() INNER times; then makes ALLOCS objects of
// class CorebpfThing (kept, so none is optimized away); prints "done" and halts.
public class CorebpfCalls {
    static long sink;
    static CorebpfThing[] kept;

    static void inner(int i) {
        sink += i;
    }

    static void middle(int inner) {
        for (int i = 0; i < inner; i++) {
            inner(i);
        }
    }

    static void outer(int middle, int inner) {
        for (int i = 0; i < middle; i++) {
            middle(inner);
        }
    }

    public static void main(String[] args) throws Exception {
        int outer = Integer.parseInt(args[0]);
        int middle = Integer.parseInt(args[1]);
        int inner = Integer.parseInt(args[2]);
        int allocs = Integer.parseInt(args[3]);
        System.out.println("ready");
        System.out.flush();
        System.in.read();
        for (int i = 0; i < outer; i++) {
            outer(middle, inner);
        }
        kept = new CorebpfThing[allocs];
        for (int i = 0; i < allocs; i++) {
            kept[i] = new CorebpfThing(i);
        }
        System.out.println("done");
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }
}

class CorebpfThing {
    final long value;

    CorebpfThing(long value) {
        this.value = value;
    }
}
