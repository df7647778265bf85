/* viewdev.h — the device numbers libdiehard shows for a replica's file
 * views (viewstat.h), shared with the supervisor that names them
 * (supervisor/files/view.c). A major number no driver registers, so no
 * real device is mistaken for one: view v shows minor 4v for its overlay
 * (directories), 4v + 1 for its lower layer's files, 4v + 2 for the files
 * made in it (its upper layer's), and the staging tmpfs VIEW_DEV_STAGING. */
#ifndef DIEHARD_VIEWDEV_H
#define DIEHARD_VIEWDEV_H

#define VIEW_DEV_MAJOR 0x7d1eu
#define VIEW_DEV_STAGING 0xffff0u /* its minor */
#define VIEW_DEV_UPPER 2u          /* minor % 4 of an upper layer's files */

#endif
