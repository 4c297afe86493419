//! Kernel-function tracing, which this host cannot do (no kprobes; fentry loads are refused): built only with
//! `--features vm` and run by the VM kernel matrix (vm/vmtest.sh) on kernels that have both, once with each
//! mechanism forced through COREBPF_ATTACH by vm/scenarios and once with the tool's own choice.

use corebpf_tests::scenario::funccount_counts_vfs_read_exactly;

/// Reads made by the child: exact counts, and different from any count of background noise.
const READS: u32 = 1237;

#[test]
fn funccount_counts_every_vfs_read_of_one_process() {
    // The mechanism is the one the scenario forces (COREBPF_ATTACH in the environment), or the tool's choice.
    let forced = std::env::var("COREBPF_ATTACH").ok();
    funccount_counts_vfs_read_exactly(forced.as_deref(), READS);
}
