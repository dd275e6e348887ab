//! The block device to put io limits on for a directory: the whole disk under its
//! filesystem (io limits take whole disks, not partitions).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::{fs, stat, CgroupError};

/// The whole-disk block device (major, minor) holding `path`'s filesystem, for
/// [`IoLimit`](super::IoLimit)s: the filesystem's device (`stat` `st_dev`), or the
/// disk it is a partition of (`/sys/dev/block/M:m/partition` exists). A filesystem
/// without a block device (tmpfs, overlay, btrfs: major 0) is an error that
/// suggests a directory on a disk.
pub fn block_device_of(path: &Path) -> Result<(u32, u32), CgroupError> {
    let dev = std::fs::metadata(path)
        .map_err(|source| CgroupError::Read {
            path: path.to_path_buf(),
            source,
        })?
        .dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    if major == 0 {
        return Err(CgroupError::NoBlockDevice {
            path: path.to_path_buf(),
            major,
            minor,
        });
    }
    whole_disk((major, minor), Path::new("/sys/dev/block"))
}

/// `dev` itself, or for a partition the disk that holds it, looked up in
/// `sys_dev_block` (`/sys/dev/block`, whose `M:m` entries link to the device's
/// sysfs directory; a partition's directory sits inside its disk's).
fn whole_disk(dev: (u32, u32), sys_dev_block: &Path) -> Result<(u32, u32), CgroupError> {
    let node = sys_dev_block.join(format!("{}:{}", dev.0, dev.1));
    if !node.join("partition").exists() {
        return Ok(dev);
    }
    let parent = node.join("../dev");
    fs::parse(&parent, |t| {
        stat::rule_devices(t)?
            .first()
            .copied()
            .ok_or("empty".into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::tests::TempDir;

    #[test]
    fn a_partition_resolves_to_its_disk() {
        // /sys/dev/block/8:1 -> ../devices/sda/sda1, which holds `partition`,
        // and whose parent sda holds `dev` = 8:0.
        let t = TempDir::new("blockdev");
        let sda = t.path().join("devices/sda");
        std::fs::create_dir_all(sda.join("sda1")).expect("dirs");
        std::fs::write(sda.join("dev"), "8:0\n").expect("dev");
        std::fs::write(sda.join("sda1/dev"), "8:1\n").expect("dev");
        std::fs::write(sda.join("sda1/partition"), "1\n").expect("partition");
        let block = t.path().join("dev/block");
        std::fs::create_dir_all(&block).expect("dirs");
        std::os::unix::fs::symlink("../../devices/sda/sda1", block.join("8:1")).expect("link");
        std::os::unix::fs::symlink("../../devices/sda", block.join("8:0")).expect("link");
        assert_eq!(whole_disk((8, 1), &block).expect("partition"), (8, 0));
        assert_eq!(whole_disk((8, 0), &block).expect("disk"), (8, 0));
        // A device sysfs does not know (device-mapper in a container) is used as is.
        assert_eq!(whole_disk((253, 3), &block).expect("unknown"), (253, 3));
    }

    #[test]
    fn filesystems_without_a_disk_are_refused() {
        // procfs always has an anonymous device (major 0).
        let err = block_device_of(Path::new("/proc")).unwrap_err();
        assert!(
            matches!(err, CgroupError::NoBlockDevice { major: 0, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("directory on a disk"), "{err}");
    }

    #[test]
    fn the_temp_dir_is_on_the_disk_findmnt_names() {
        // findmnt (util-linux) says which device holds the directory; when that is
        // a whole disk, nnb must name the same one.
        let dir = std::env::temp_dir();
        let Ok(out) = std::process::Command::new("findmnt")
            .args(["-n", "-o", "MAJ:MIN", "--target"])
            .arg(&dir)
            .output()
        else {
            eprintln!("skipping: no findmnt");
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let devices = stat::rule_devices(&text);
        let Ok([expected]) = devices.as_deref() else {
            panic!("findmnt said `{text}`");
        };
        let whole = !Path::new(&format!(
            "/sys/dev/block/{}:{}/partition",
            expected.0, expected.1
        ))
        .exists();
        match block_device_of(&dir) {
            Ok(dev) if whole => assert_eq!(dev, *expected),
            Ok(dev) => assert_ne!(dev, *expected, "a partition must resolve to its disk"),
            Err(e) => assert_eq!(expected.0, 0, "{e}"),
        }
    }
}
