#include <iostream>

#include "cli/app.h"

int main(int argc, char** argv) { return blk::cli::RunBlkctl(argc, argv, std::cout, std::cerr); }
