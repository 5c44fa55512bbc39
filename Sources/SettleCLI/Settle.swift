/// Entry point of the `settle` command.
public enum Settle {
    public static func main() {}
}
