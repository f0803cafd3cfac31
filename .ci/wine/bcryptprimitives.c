/*
 * ProcessPrng for wine 8 (Debian 12's wine64), which lacks
 * bcryptprimitives.dll: the Go runtime (1.24 and later) loads it from
 * system32 at start and throws without it. It fills the buffer from
 * RtlGenRandom (advapi32's SystemFunction036), as Windows' own does from
 * its kernel generator. .ci/run builds it with mingw and copies it into
 * the wine prefix; Windows itself, and wine 9 and later, have their own.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
	while (length > 0) {
		ULONG n = length > 0x10000000 ? 0x10000000 : (ULONG)length;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		length -= n;
	}
	return TRUE;
}
