//! The tool on its own (`cargo run -p <tool>`); the multicall binary `corebpf-tools` calls the same entry.

fn main() -> std::process::ExitCode {
    tool::TOOL.run_from_env()
}
