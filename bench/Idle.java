// SPDX-License-Identifier: Apache-2.0 OR MIT
// The idle Java process of `make bench` (`{java_pid}` in a bench entry), run by the JDK's source launcher.
public class Idle {
    public static void main(String[] args) throws InterruptedException {
        Thread.sleep(Long.MAX_VALUE);
    }
}
