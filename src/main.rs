fn main() {
    std::process::exit(msc::cli::main());
}
