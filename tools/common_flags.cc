#include "dpkit/tools/common_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(double, sampling_rate, 0.0,
          "Poisson sampling rate q in (0, 1]; or give --dataset_size and --batch_size");
ABSL_FLAG(int64_t, dataset_size, 0, "number of training examples n (q = batch/n)");
ABSL_FLAG(int64_t, batch_size, 0, "expected batch size (Poisson sampling)");
ABSL_FLAG(double, noise_multiplier, 0.0,
          "noise standard deviation divided by the clipping norm (sigma)");
ABSL_FLAG(int64_t, steps, 0, "number of training steps T; or give --epochs");
ABSL_FLAG(double, epochs, 0.0, "number of epochs (steps = ceil(epochs / q))");
ABSL_FLAG(double, delta, 1e-5, "target delta in [1e-300, 1)");
ABSL_FLAG(double, epsilon, 0.0, "epsilon >= 0");
ABSL_FLAG(double, target_epsilon, 0.0, "privacy budget epsilon > 0 to calibrate for");
ABSL_FLAG(std::string, accountant, "all",
          "which accountant(s) to use (pld and rdp: certified; gdp: CLT approximation)");
ABSL_FLAG(std::string, rdp_conversion, "optimal",
          "rdp accountant: conversion to (epsilon, delta): optimal (Asoodeh et al. 2021), improved "
          "(Balle et al. 2020), classic (Mironov 2017)");
ABSL_FLAG(std::string, format, "text", "output format");
ABSL_FLAG(uint64_t, seed, 0,
          "seed for non-private randomness only: model initialisation (word2vec: also its data "
          "preparation); Poisson sampling and noise always come from the secure generator");
