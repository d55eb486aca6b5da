// payrecon-pgbench-sql executor [B]|intake|ladder N: prints the pgbench script of that benchmark's
// database baseline (the executor's for batches of B, if given), or of rung N of
// bench/intake_ladder (bench/pgbench_scripts.hpp).
// bench/executor, bench/intake and bench/intake_ladder run it.
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
    if (argc == 3 && std::strcmp(argv[1], "executor") == 0) {
        try {
            std::cout << payrecon::bench::executor_batch_script(std::stoi(argv[2]));
            return 0;
        } catch (const std::exception& e) {
            std::cerr << "payrecon-pgbench-sql: " << e.what() << "\n";
            return 1;
        }
    }
    if (argc == 3 && std::strcmp(argv[1], "ladder") == 0) {
        try {
            std::cout << payrecon::bench::ladder_script(std::stoi(argv[2]));
            return 0;
        } catch (const std::exception& e) {
            std::cerr << "payrecon-pgbench-sql: " << e.what() << "\n";
            return 1;
        }
    }
    std::cerr << "usage: payrecon-pgbench-sql executor [B]|intake|ladder N\n";
    return 2;
}
