"""The dtype names a spec may write, fixed by the format version, not by the installed torch.

The JSON Schema lists these, so a file's validity in an editor is the same on every machine.
A torch that adds a dtype does not change the format: a new name comes with a new format
version (the tests check that the installed torch has no dtype missing here).
"""

from __future__ import annotations

#: torch 2.13's ``torch.dtype`` attribute names, plus ``bcomplex32`` (added by torch 2.14).
#: Format versions 1 and 2 share this list.
SPEC_DTYPES: frozenset[str] = frozenset(
    {
        "bcomplex32",
        "bfloat16",
        "bit",
        "bits16",
        "bits1x8",
        "bits2x4",
        "bits4x2",
        "bits8",
        "bool",
        "cdouble",
        "cfloat",
        "chalf",
        "complex128",
        "complex32",
        "complex64",
        "double",
        "float",
        "float16",
        "float32",
        "float4_e2m1fn_x2",
        "float64",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e5m2",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
        "half",
        "int",
        "int1",
        "int16",
        "int2",
        "int3",
        "int32",
        "int4",
        "int5",
        "int6",
        "int64",
        "int7",
        "int8",
        "long",
        "qint32",
        "qint8",
        "quint2x4",
        "quint4x2",
        "quint8",
        "short",
        "uint1",
        "uint16",
        "uint2",
        "uint3",
        "uint32",
        "uint4",
        "uint5",
        "uint6",
        "uint64",
        "uint7",
        "uint8",
    }
)

#: The representable range of each integer dtype above (the schema bounds its constraints).
SPEC_DTYPE_RANGES: dict[str, tuple[int, int]] = {
    "int": (-2147483648, 2147483647),
    "int16": (-32768, 32767),
    "int32": (-2147483648, 2147483647),
    "int64": (-9223372036854775808, 9223372036854775807),
    "int8": (-128, 127),
    "long": (-9223372036854775808, 9223372036854775807),
    "qint32": (-2147483648, 2147483647),
    "qint8": (-128, 127),
    "quint2x4": (0, 3),
    "quint4x2": (0, 15),
    "quint8": (0, 255),
    "short": (-32768, 32767),
    "uint16": (0, 65535),
    "uint32": (0, 4294967295),
    "uint64": (0, 18446744073709551615),
    "uint8": (0, 255),
}
