# Usage: awk -f tools/funclen.awk $(find src -name "*.c") | sort -rn | head
# funclen.awk: lines of each top-level C function, from the first line of its
# signature (column 0, an identifier, a "(", no "=") to its closing "}" at column 0
/^[A-Za-z_][^=]*\(/ && !/;[ \t]*$/ { if (!inbody) { name = $0; start = FNR } }
/\{[ \t]*$/ && start { inbody = 1 }
/;[ \t]*$/ && !inbody { start = 0 }
/^\}/ { if (start && inbody) printf "%5d %s:%d %s\n", FNR - start + 1, FILENAME, start, substr(name, 1, 70); start = 0; inbody = 0 }
