#ifndef DOORBELL_CLOUD_CLIBPQ_SHIM_H
#define DOORBELL_CLOUD_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
