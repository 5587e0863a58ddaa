def pytest_configure(config):
    config.addinivalue_line("markers", "other_version: needs the NDIF API restarted to refuse this nnsight")
    config.addinivalue_line("markers", "stopped: stops the NDIF API (run alone, after the others)")
