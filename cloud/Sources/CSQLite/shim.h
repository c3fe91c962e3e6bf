#ifndef DOORBELL_CLOUD_CSQLITE_SHIM_H
#define DOORBELL_CLOUD_CSQLITE_SHIM_H
#include <sqlite3.h>
#endif
