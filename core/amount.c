#include "amount.h"
