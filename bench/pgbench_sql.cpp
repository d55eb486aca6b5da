// payrecon-pgbench-sql executor|intake: prints the pgbench script of that benchmark's database
// baseline (bench/pgbench_scripts.hpp). bench/executor and bench/intake run it.
#include "bench/pgbench_scripts.hpp"

#include <cstring>
#include <iostream>

int main(int argc, char** argv) {
    if (argc == 2 && std::strcmp(argv[1], "executor") == 0) {
        std::cout << payrecon::bench::executor_script();
        return 0;
    }
    if (argc == 2 && std::strcmp(argv[1], "intake") == 0) {
        std::cout << payrecon::bench::intake_script();
        return 0;
    }
    std::cerr << "usage: payrecon-pgbench-sql executor|intake\n";
    return 2;
}
