"""The preset dictionary of the journal's archives: a Zstandard raw-content dictionary (RFC 8878 §5)
for the units written now, and the zlib ``zdict`` (RFC 1950 "preset dictionary") of the deflate units
earlier versions wrote.

A compressor does much better on a block's rows when it may refer to typical rows it has not seen in the
block itself: field names, schema names, a floor record and a scoreboard of a 17-spot baccarat table.
These bytes were made once by ``python tests/journal_support.py`` (rows of simulated rounds) and are
FROZEN: every archive records the :data:`ZDICT_ID` it was compressed with, and a journal written with
this dictionary can only be read with exactly these bytes (their SHA-256 is checked at import and by
``tests/test_journal_archive.py``). A better dictionary gets a new id and lives beside this one.
"""

from __future__ import annotations

import base64
import hashlib
import zlib

__all__ = ["ZDICT", "ZDICT_ID"]

ZDICT_ID = 1
"""The id archives record (:func:`daemon.journal.seal.pack_block`)."""

_PACKED = (
    "eNrlXU+P40gVZ/kGXLjAIfI5nXX9cWz3jZ6BnZVYid0dAZpRyzhJdTpMYgfbmZ7eVn8FJA6LtEJC2gNCsPsBOK7YQeKy3DnzRaiy"
    "E9uJq+xnuwzdcBhNx3He79X7/erVe5Vy96efr775+sO/YBNPzxA6w+5zhM8xObfwBBPzxZ+eMT9KZsxP3n7vzliw16s5M86N+Dpk"
    "xtiI2a+Mc2fq3n8qrHwEsfL9kpWtv4gPVjCmNDPzcS9nbDOzwuRWLPPFFx9vw+TJtR8s2eLte0p3LMp/5HfyN9BPxOXET9K71v6c"
    "LfgFfxPuAv42Ms095pUc04ZjWgXmBQxzKcd0TzB/pMacFpjP6zCtA+QnEkh7YnLIL58yf82ii12ShMFbqsS0ydiYpTfxt4LQ24QR"
    "82YsiY0M4dcSBHdim1wCT/xo8TTyb4K3rkoCDh4bc36bcX5nRH7wioeLX4l3KzHGZ8Z9hvGbUwx6bqKJawMxaA3G0wPGbyUYdILp"
    "EYajxLBPMZwc4skB4vdVCIQmJjklAynJcJ0SGRHneuGxYGHcf/Z5+I9vffdfn3zz9Wf/HM38+ZmJzkwfzfCcLM4QV4PApcy6mvr2"
    "7A/pB7/6+p2/ffs7d0Y8v2Ybn5tL/NmaxSyI2SS9gaMu/Y3wgRvkY/MTfmV77cfi0jzcbNcsEQEQw46N85d3xipYsDc8uodQGB8+"
    "Ex8J41WySj3mOr1lkXE/zu/Fxb1Pj++d8Sge30vye50nTXZpca/C7uXYuGZrfseVv44ZfxGuF948XDAxlsv9sLyIx2YVrIIld9Xi"
    "zm5ZwBIeitSWOSEuFSPYJV6Gtre19uPEy4J4uPQ6XBUvIvZa8F16l0VxapLHLuUhizqn8cD9nsSxsYmXnjBlNNHMP8kn6blRlfV0"
    "YiHzhbAsJCww974S86CkO65WlZJsiZLe8bsqiaeSRMS3ENKjZMZuZMZuZmafDWTMoAMzV+o5bhbkfxHzsK7ZhgVJ/NVfOT+/kPNT"
    "3GaUltB0DeVLt3jBf+QUiUnGois2T7ytv4pESuKr1aKYe+li9IoJMkxzbIS7hKcIEax1GGdZImHLMLrNFhFhg18MF4LwYLdej41A"
    "gJxln+Yf3aziLO7iZbYwev5VwiJvHc5ftaXHbJw4pqaJs6yhx9ZDz0Ubevbp7oHT0zh7TFsPPdc19Dhqen7egp5nH8jouQ53MePF"
    "U8Buc3KyyO6J6cXLQLQ4jbQ4emhZ1dDiapk1uJzU8P9GUnMb6XH10PNLNT3I1EPPRRt6HkVSQ2YTPaXY9aLnVQ09SAs9pDx7SNvZ"
    "IxzpldsGoQc10oP00HNT05WRHOKPEYt36z01f1dU09kt0nr6qIzNr/N2dM/G+cusHeO90+X4MIPERdEf8SaJX8zu9JIw8ddpA5vd"
    "VbpwswoC8TEjWQkG9x8I/GQXiTuSaMfyT51c3d+b0ly4md55dG0R+csw8Oz8wpaLyvec/et7/qnwzaEVWKRtc/bzLEwLffEjtGgn"
    "jUU70SOB2xoJWDnEl1frMIzeTT+d6oD8VK6D9D5P3VsdaaF9fz42rvw583bbA3din2knBi/inSgike/7GOPKJkn22iv2fPy1H23S"
    "wIup3mZDoJtz+YZRo3O0xrnGHYjOzmU7TY3O2TXONW55dHYuF3i9c27FOTErd1Gwn6w3/pLPy1SJR5u1lU7mEEtJlYzSxWAbiYnA"
    "kcNgfZsnhrvj/dhTs3kUOpt9LjObZUJVQd9kUkOr3RiM/u1iE8RTKcQ+k8/CYNdYHDQiXMARTscAGkKfrq3BNpaXtjUqB0UdX8jM"
    "1qkcZPW5zKpS5KCJo6P3agxG//6hAYLIS+C+NJILmdneyUpHxd7oeRuI05jXjOJSWM17leMF4/FsTdYvppoz9MMb1CPYBgMP5jFt"
    "HsEH9Yi2XMCDekwbFfBBaUi0XQeFhhpU19q/GMh2F18fDyQrUyqDGCptd+syHs4AOvQzhfM3q0Dtu+GMknAkjKb+08FE1L/zqKNj"
    "v4Xl/Wdp6d3rPLghde2AHsxU6dhrPRz/u3R13ea6M9gq2LH/ejAkdO30/ssDuNxv62WNWLHDZ6CJJYYhTubwVz/7wXs//Mj78fsf"
    "vJ9p7TWLVolw8caPguyAT8LeiBGLEIzwSERlhC/OR1kERumYR5yyER9wvFqwUXLN/4ld79F6tVkl8UjEIy2zTLN0+jHyV3F6+vHo"
    "1JBiixpP6P6ETTEbypP8sMV52L8U73lZ8LIAyO0SMnFP9kj3J/fKe6QYi3NCspOqbLNNbksHODljFaaElNToBILuyM+s9ke3IOiu"
    "/PRqf3QbgE7M0wNO2uBdCDw6PcCjB55OTIjuCB6f1Eza4CHCI2R8Ut5og4coj9DT4zna4EHSs8bHlZA2dJDypscZThs6AgmvSHj4"
    "uVZ0kO6c0wNA2uBBunNPD7hog4fojprj4+JJGzpEd7TIeESr7jBEdxSfHl7RBg8RHiXjk90bLfD7x2Ia4Vs9ENPaA4j2Wj0e09oD"
    "iP7aPCzT1gECkaBlKyqOige4iwsQGVqOourQ4wJIiq6i8pDx0N4FiBanpqL60CIFiBanSFGA6PCAQsQ4xfIaRIsQKESLUyKvQ7SE"
    "AKLEKZWXIlpSEgUJ0VKUI3pYAClxqihJtLhggaRoy8sSPR6ApOjISxMtSrBAWnQV5YmWrGhBxGibihJFQxRsWHNgK8oUAdLfA4gS"
    "bEWZoscDiBJsRZlS8cDq4ABIB6oypeIB7uICJCnZqjJFiwugfsFWlSkyHtq7ANGioypTdEgB1DY4qjJFiwcQMTqKMkWPECBadBRl"
    "io4QgNoGR1GmaElJoK7BUZUpWlgAdQ2OqkzR4wJIiooyRY8HICkqyhQtSgB1DY6qTNGSFUFtg6sqU8BRuMy+DPODw9Pl/+dPx4Ti"
    "UfmFJ6cF04mTaTOLr6dkb7/5fPhNEPI7y08PQJ/KsRqfyrH0PJXzpuapHJpD/DmehxFL4yd+08G7v1M8NpffZQgoIWUurxL4Db8w"
    "Fd/6+guP0y00/PKOh2+dbgLy97P/00e8yl9sQ6WRK+rwBWimSysfOBKT8QgPDYA3zfFwBQ93wstmSOPwSAWOlODyr9l7Dq/QEa3g"
    "US142XCLrLKHsypwlhb2juDcHG6aw6EBxWnneHYFDw06GZwKHtYfzoI9twJH9IulYA+ZFTw6wGQo6EOoAmgNmlxQkV2wRKC6RlgC"
    "JBVA1Ah4tOS3xKMVPDxAREkBaFUAyZBTAk0reHSAAdIC0K4AWgNIprTgFkmG9EqitStgKaJuBQ91GuAJnoJAbFbg8JBLEkYVvGaB"
    "9piBGFfw6KDjIxU8a9CkjYsUQwdc5EsjtCqAaMgUg6cVvLJCj9o0DeG0K2hDVKBFQsNOBZAOW9G7FUCrfzwV5PE+TfStq6Unuilp"
    "s5Q33KWj/RHzX6WyWrBtcp01myvREZvdA1HXQEF8wPp8kDZVEB9IGx/kC06l0UISKkpPJGQu4CGooLJ2AeJDLyqysFQaMgxRJNET"
    "hiMXprKSFOKCRkHasjIV4gPR54Mjq1whPlBtVLiyUk8tSDqAGpApK/8gPmiUQ6kRpJBpYQ2SqIssaUHYmA7iBKk4gWBOKOmAF7PV"
    "JnIKYcMeJBBWxQkEc0Jfsi41m1NImrKHSFOlBtSGyNIZhI0iWToQSbjdnKitIEqNqgsJhPhVehqcOFJEqXtFsJISDZCzSz0tghWV"
    "aIA0Uep0EaysRHrmx3EsSoUlqLJEg5SWpa4YgSo7RAZxw6q6gYBu5MpAvTkpfQ8AKmwQHSQYpe16UFmBJHUF6u+Ge2hJ2S3zZuGt"
    "tCvlr8Od8CpKv54+dLBeqRnJrx0Ik7VUuZ3ZesdkhkjVEJI1JU0OkTqHSD+HiKwc7OAQlVV0jQ7RughN4Q7RugjZLRyy6hyyi2ne"
    "aGgKMYS7GaoOjQAM2XUeOfBY23UOuS1ibdep0W0Ra6duZG6LWLt1hlCLFCLuBVhCAEuo1lKbdCQzhaVraReniHQhanYK146PtJAB"
    "IiBTuKMpXDUFmXaIgryiEFPS7CQegt/467V6G7bX+tJCq7XLS8+FU7qh2G99wZrWFwyPUO3y0mba1C4vLVby2tWFwgdWu7hY/RYF"
    "3KUiqF1c2lQEjq6KwNVVEdQvLk6/NI46LeUNS4upbWlB+paWNusdAVlC3Szhjitn/cLSIgko15V5OH/FL86vve1q2Wlpobp6qdrM"
    "iXQV5lhT5iT9Ml6nVF6bOS1ddbmlqy5vkctBmdPsnTnbJPP61Nkqm9emTkdX5nT1JU5TW+Jslc3rM2ebFNCQOVEb9lSpc838xSpY"
    "evkOm3gsIj1ynv35CHF+oniQAeVbcOILgHRDLMU/2g/DJ3thJN8HizMLsj+8d38PP9hPGw/2054H+/8N3K5xPQ=="
)
SHA256 = "ae5d8be530afbc052142ce3e6771b82f19deb57825352ede168d558dc64db1cb"
SIZE = 30498

ZDICT: bytes = zlib.decompress(base64.b64decode("".join(_PACKED)))
"""The dictionary (at most 32 KiB: deflate's window, for the units written with deflate)."""

if hashlib.sha256(ZDICT).hexdigest() != SHA256 or len(ZDICT) != SIZE:  # pragma: no cover - a broken install
    raise ImportError("tablesense journal dictionary 1 is corrupt (its SHA-256 does not match)")
