"""The machine a run records: two CPUs of one model name can differ in bf16 support."""

from anatomy.machine import cpu_description

INFO = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx2 {extra}\n"


def test_the_description_says_whether_bf16_is_in_hardware():
    assert cpu_description(INFO.format(extra="")).endswith("cores, no bf16 in hardware")
    assert cpu_description(INFO.format(extra="avx512f avx512_bf16")).endswith("bf16 in hardware (AVX-512 BF16)")
    assert cpu_description(INFO.format(extra="avx512_bf16 amx_bf16")).endswith("bf16 in hardware (AMX)")
    assert cpu_description(INFO.format(extra="")).startswith("AMD EPYC, ")
