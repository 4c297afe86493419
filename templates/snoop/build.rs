// SPDX-License-Identifier: Apache-2.0 OR MIT
fn main() {
    corebpf_build::build_skeleton();
}
