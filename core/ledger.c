#include "ledger.h"
