//! The `msc` binary: the command line of `cli`, its exit code returned to the shell.

fn main() {
    std::process::exit(msc::cli::main());
}
