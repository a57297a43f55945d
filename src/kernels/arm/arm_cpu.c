/* arm_cpu.c: ARM64 CPU feature detection for the kernel dispatcher (owner: arm).
 * Linux: getauxval(AT_HWCAP) bit HWCAP_ASIMD (AdvSIMD), HWCAP_ASIMDDP (sdot/udot, FEAT_DotProd),
 * getauxval(AT_HWCAP2) bit HWCAP2_I8MM (smmla, FEAT_I8MM); the bit values are the kernel's ABI
 * (Documentation/arch/arm64/elf_hwcaps.rst) and are spelled out when old headers lack them.
 * macOS: sysctlbyname("hw.optional.arm.FEAT_DotProd" / "FEAT_I8MM"), compiled only under
 * __APPLE__ (never run in our CI). Windows on ARM64: IsProcessorFeaturePresent with
 * PF_ARM_V82_DP_INSTRUCTIONS_AVAILABLE (43) and PF_ARM_SVE_I8MM_INSTRUCTIONS_AVAILABLE (53, the
 * only i8mm flag Windows has: it names SVE's I8MM, so i8mm may be missed on a core without SVE,
 * never claimed wrongly), compiled only under _WIN32 (no Windows ARM64 toolchain here: never built
 * in our CI). AdvSIMD is mandatory in ARMv8-A, so NEON is always present. */
#include "kernels/arm/arm.h"

#if defined(__aarch64__)

#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif

uint32_t arm_cpu_features(void) {
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    uint32_t f = 0;
    if (hw & HWCAP_ASIMD) f |= KCPU_NEON;
    if (hw & HWCAP_ASIMDDP) f |= KCPU_DOTPROD;
    if (hw2 & HWCAP2_I8MM) f |= KCPU_I8MM;
    /* Our i8mm table also uses sdot for matvec: only claim it with dotprod present. */
    if (!(f & KCPU_DOTPROD)) f &= ~KCPU_I8MM;
    return f;
}

#elif defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>

static int arm_sysctl_flag(const char *name) {
    int v = 0;
    size_t n = sizeof v;
    if (sysctlbyname(name, &v, &n, NULL, 0) != 0) return 0;   /* unknown name: feature absent */
    return v != 0;
}

uint32_t arm_cpu_features(void) {
    uint32_t f = KCPU_NEON;
    if (arm_sysctl_flag("hw.optional.arm.FEAT_DotProd")) f |= KCPU_DOTPROD;
    if ((f & KCPU_DOTPROD) && arm_sysctl_flag("hw.optional.arm.FEAT_I8MM")) f |= KCPU_I8MM;
    return f;
}

#elif defined(_WIN32)
#include <windows.h>
#ifndef PF_ARM_V82_DP_INSTRUCTIONS_AVAILABLE
#define PF_ARM_V82_DP_INSTRUCTIONS_AVAILABLE 43
#endif
#ifndef PF_ARM_SVE_I8MM_INSTRUCTIONS_AVAILABLE
#define PF_ARM_SVE_I8MM_INSTRUCTIONS_AVAILABLE 53
#endif

uint32_t arm_cpu_features(void) {
    uint32_t f = KCPU_NEON;
    if (IsProcessorFeaturePresent(PF_ARM_V82_DP_INSTRUCTIONS_AVAILABLE)) f |= KCPU_DOTPROD;
    if ((f & KCPU_DOTPROD) && IsProcessorFeaturePresent(PF_ARM_SVE_I8MM_INSTRUCTIONS_AVAILABLE)) f |= KCPU_I8MM;
    return f;
}

#else
/* Other AArch64 systems: AdvSIMD only (always present in ARMv8-A). */
uint32_t arm_cpu_features(void) { return KCPU_NEON; }
#endif

#else  /* !__aarch64__ */
uint32_t arm_cpu_features(void) { return 0; }
#endif
