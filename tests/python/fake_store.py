"""A dict in the place of torch.distributed's key-value store, for tests that drive the plans and
the live rank windows on synthetic windows (no processes, no clock)."""


class Store:
    def __init__(self):
        self.data = {}

    def set(self, key, value):
        self.data[key] = value.encode() if isinstance(value, str) else value

    def check(self, keys):
        return all(k in self.data for k in keys)

    def get(self, key):
        return self.data[key]

    def compare_set(self, key, expected, value):
        self.data.setdefault(key, value.encode())

    def multi_get(self, keys):
        return [self.data.get(k, b"x ") for k in keys]
