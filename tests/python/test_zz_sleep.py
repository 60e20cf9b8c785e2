import gc, time, threading
def test_zz_sleep():
    gc.collect()
    print("THREADS", [t.name for t in threading.enumerate()], flush=True)
    time.sleep(75)
