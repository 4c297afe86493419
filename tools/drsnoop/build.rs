fn main() {
    corebpf_build::build_skeleton();
}
