// payrecon-fake-provider: parses the command line, serves until SIGTERM or SIGINT, stops cleanly.
// Exit codes: 0 stopped by a signal, 1 could not listen, 2 bad arguments or a missing secret
// variable (the API key's, or PayPal's client secret's when named).
#include "tests/fake_provider/command_line.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <pthread.h>

int main(int argc, char** argv) {
    using namespace payrecon::fake;
    CLI::App app{"payrecon-fake-provider: a fake payment provider on 127.0.0.1 -- Stripe "
                 "(PaymentIntents), Adyen (/v71/payments), Checkout.com (/payments) and PayPal "
                 "(Orders v2, Transaction Search) on one ledger -- with fault injection and an "
                 "honest ledger of what it executed (see tests/fake_provider/README.md)"};
    CommandLine command_line;
    add_options(app, command_line);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    FakeProviderOptions options;
    try {
        options = to_options(command_line, [](const char* name) { return std::getenv(name); });
    } catch (const std::invalid_argument& e) {
        std::cerr << "payrecon-fake-provider: " << e.what() << "\n";
        return 2;
    }

    // Signals go to this thread's sigwait; every thread started below inherits the block.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    FakeProvider server(std::move(options), std::cout);
    try {
        server.start();
    } catch (const std::exception& e) {
        std::cerr << "payrecon-fake-provider: cannot listen: " << e.what() << "\n";
        return 1;
    }
    if (!command_line.port_file.empty()) {
        const std::string tmp = command_line.port_file + ".tmp";
        std::ofstream(tmp) << server.port() << ' ' << server.admin_port() << '\n';
        std::rename(tmp.c_str(), command_line.port_file.c_str());
    }
    int sig = 0;
    sigwait(&signals, &sig);
    server.stop();
    return 0;
}
