fn main() {
    std::process::exit(ralph::cli::main());
}
