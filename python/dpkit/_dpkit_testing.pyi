# Type stubs of the test-only extension _dpkit_testing (python/src/testing_module.cc).
from dpkit._dpkit import RandomGenerator

class SeededGeneratorForTesting(RandomGenerator):
    """xoshiro256** seeded through SplitMix64: reproducible, NEVER for privacy noise."""
    def __init__(self, seed: int) -> None: ...
