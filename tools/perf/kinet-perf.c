/* placeholder, replaced by the kinet-perf tool */
#include <kinet/kinet.h>
int main(void) { return 0; }
